package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/migplan"
	"github.com/colocd/colocd/predictor"
)

func newMIGPlanCmd() *cobra.Command {
	var (
		in                 migplan.Input
		infPath, trainPath string
		calPath            string
		asJSON             bool
	)
	cmd := &cobra.Command{
		Use:   "plan --gpu NAME --inference FILE --training FILE --rate RPS --slo-p99-ms MS [--json]",
		Short: "Rank a GPU's MIG layouts for one inference service and one trainer, against MPS",
		Long: `Rank the maximal MIG layouts of a GPU model (colocd mig layouts) for one
inference service at --rate and one trainer. Per layout: the instance the
service runs on alone and its predicted p99 there, whether it holds
(1 − --headroom) × --slo-p99-ms, the instance the trainer runs on and its
throughput (the share of its whole-GPU speed it keeps), and the instances left
spare. The service goes where the trainer gets the most with the SLO held.
Next to them: MPS sharing of the whole GPU at the highest trainer percentage
(in --pct-step steps) that holds the SLO, with the device's calibration
preset (or --calibration). Profiles are scaled to each instance's SMs and
memory bandwidth (docs/predictor.md#on-a-mig-instance).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			switch {
			case in.GPU == "":
				errs = append(errs, errors.New(`--gpu: want a GPU name such as "NVIDIA H200"`))
			case infPath == "":
				errs = append(errs, errors.New("--inference: want an inference profile file"))
			case trainPath == "":
				errs = append(errs, errors.New("--training: want a training profile file"))
			}
			if err := errors.Join(append(errs, in.Check())...); err != nil {
				return fmt.Errorf("mig plan: %w", err)
			}
			var err error
			if in.Inference, err = loadKind(infPath, predictor.KindInference); err != nil {
				return fmt.Errorf("mig plan: --inference: %w", err)
			}
			if in.Training, err = loadKind(trainPath, predictor.KindTraining); err != nil {
				return fmt.Errorf("mig plan: --training: %w", err)
			}
			if in.Calibration, err = predictor.ResolveCalibration(calPath, in.GPU); err != nil {
				return fmt.Errorf("mig plan: --calibration: %w", err)
			}
			plan, err := migplan.Make(in)
			if err != nil {
				return fmt.Errorf("mig plan: %w", err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), plan)
			}
			return plan.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.GPU, "gpu", "", `the GPU's NVML name, e.g. "NVIDIA H200"`)
	f.StringVar(&infPath, "inference", "", "the inference service's profile")
	f.StringVar(&trainPath, "training", "", "the trainer's profile")
	f.Float64Var(&in.RateRPS, "rate", 0, "the service's request rate, req/s")
	f.Float64Var(&in.SLOP99MS, "slo-p99-ms", 0, "the service's p99 latency SLO, ms")
	f.Float64Var(&in.Headroom, "headroom", 0.1, "the share of the SLO kept free, as admission.headroom")
	f.IntVar(&in.PctStep, "pct-step", 5, "the MPS percentage search's step")
	f.IntVar(&in.Requests, "requests", predictor.DefaultRequests, "simulated requests per prediction")
	f.Uint64Var(&in.Seed, "seed", 1, "arrival seed")
	f.StringVar(&calPath, "calibration", "", "calibration file for MPS (default: the GPU's preset)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// loadKind loads a profile and checks its kind.
func loadKind(path string, kind predictor.Kind) (*predictor.Profile, error) {
	p, err := predictor.LoadProfile(path)
	if err != nil {
		return nil, err
	}
	if p.Kind != kind {
		return nil, fmt.Errorf("%s: kind: want %q, got %q", path, kind, p.Kind)
	}
	return p, nil
}
