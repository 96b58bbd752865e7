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
		in                  migplan.Input
		infPath, trainPath  string
		calPath             string
		asJSON              bool
		pctStep, requests   int
		seed                uint64
		rate, slo, headroom float64
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
			if !(rate >= predictor.MinRateRPS && rate <= 1e9) {
				errs = append(errs, fmt.Errorf("--rate: want a rate in [0.001, 1e9] req/s, got %g", rate))
			}
			if !(slo > 0 && slo <= predictor.MaxDurationUS/1000) {
				errs = append(errs, fmt.Errorf("--slo-p99-ms: want a p99 in (0, 3.6e6] ms, got %g", slo))
			}
			if !(headroom >= 0 && headroom < 1) {
				errs = append(errs, fmt.Errorf("--headroom: want a fraction in [0, 1), got %g", headroom))
			}
			if pctStep < 1 || pctStep > 100 {
				errs = append(errs, fmt.Errorf("--pct-step: want a step in [1, 100], got %d", pctStep))
			}
			if requests < 1 {
				errs = append(errs, fmt.Errorf("--requests: want a count ≥ 1, got %d", requests))
			}
			if err := errors.Join(errs...); err != nil {
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
			in.RateRPS, in.SLOP99MS, in.Headroom, in.PctStep, in.Requests, in.Seed = rate, slo, headroom, pctStep, requests, seed
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
	f.Float64Var(&rate, "rate", 0, "the service's request rate, req/s")
	f.Float64Var(&slo, "slo-p99-ms", 0, "the service's p99 latency SLO, ms")
	f.Float64Var(&headroom, "headroom", 0.1, "the share of the SLO kept free, as admission.headroom")
	f.IntVar(&pctStep, "pct-step", 5, "the MPS percentage search's step")
	f.IntVar(&requests, "requests", predictor.DefaultRequests, "simulated requests per prediction")
	f.Uint64Var(&seed, "seed", 1, "arrival seed")
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
