package main

import (
	"fmt"
	"math"

	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/predictor/sweep"
	"github.com/spf13/cobra"
)

func newPredictCmd() *cobra.Command {
	var (
		mode, calPath        string
		infPaths, trainPaths []string
		rates, loads, bursts []float64
		sc                   predictor.Scenario
		asJSON               bool
		sweepOn              bool
		sweepStep            int
		sloMS                float64
		svgPath              string
	)
	cmd := &cobra.Command{
		Use:   "predict --inference FILE [--inference FILE ...] [--training FILE ...] [--mode timeslice|mps [--pct N ...]] (--rate RPS ... | --load F ...)",
		Short: "Predict inference latency under co-location",
		Long: `Predict what co-located training jobs do to an inference service's latency.

Requests arrive by a seeded Poisson process at --rate (req/s) or at --load, a
fraction of the service's solo capacity. The output gives, for the inference
service, latency_ms (arrival to completion: what SLOs are written on) and
service_ms (start of execution to completion), solo and co-located, and each
training job's iteration time. Under --mode mps every context runs at once,
each training job limited to its --pct active-thread percentage. The device
parameters come from --calibration, else the preset for the inference
profile's GPU, else the built-in default. See docs/predictor.md.

Several --inference services share the GPU with each other as well as with
the trainers: give --rate (or --load) once for all of them or once per
service, in order; each is reported, the first one as "inference".

An LLM engine (vLLM, SGLang, TGI: continuous batching) is a service whose
profile is one engine step and whose work comes in bursts of back-to-back
steps: --burst-steps N (the mean burst; once for all, or once per service,
0 for a request service) makes it one. Its --rate is then in steps per
second and --load is the fraction of time the engine has work; its
service_ms ("step" in the table) is the step latency, what inter-token
latency (TPOT) SLOs are written on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sc.SpreadRates(len(infPaths), rates, loads); err != nil {
				return fmt.Errorf("predict: %w", err)
			}
			cal, err := predictor.LoadScenario(&sc, predictor.Mode(mode), infPaths, trainPaths, calPath)
			if err != nil {
				return fmt.Errorf("predict: %w", err)
			}
			if err := sc.SpreadBursts(bursts); err != nil {
				return fmt.Errorf("predict: %w", err)
			}
			var pr predictor.Predictor
			if svgPath != "" && !sweepOn {
				return usageError{fmt.Errorf("predict: --svg %s: want --sweep too (the chart is the sweep's)", svgPath)}
			}
			if sloMS < 0 || math.IsNaN(sloMS) || math.IsInf(sloMS, 0) {
				return usageError{fmt.Errorf("predict: --slo-p99-ms: want a latency in ms ≥ 0 (0: none), got %g", sloMS)}
			}
			if sloMS > 0 && !sweepOn {
				return usageError{fmt.Errorf("predict: --slo-p99-ms: only with --sweep")}
			}
			if sweepOn {
				if predictor.Mode(mode) != predictor.ModeMPS {
					return usageError{fmt.Errorf("predict: --sweep: want --mode mps, got %q", mode)}
				}
				r, err := sweep.Run(&pr, &sc, cal, sweepStep, sloMS)
				if err != nil {
					return err
				}
				if svgPath != "" {
					if err := r.WriteSVG(svgPath); err != nil {
						return err
					}
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), r)
				}
				r.WriteText(cmd.OutOrStdout())
				return nil
			}
			pred, err := pr.Predict(&sc, predictor.Mode(mode), cal)
			if err != nil {
				return fmt.Errorf("predict: %w", err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), pred)
			}
			return pred.WriteText(cmd.OutOrStdout(), cal)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&infPaths, "inference", nil, "inference profile (required; repeat for several services on the GPU)")
	f.StringArrayVar(&trainPaths, "training", nil, "training profile (repeat for several jobs)")
	f.StringVar(&mode, "mode", string(predictor.ModeTimeslice), "GPU sharing mode: timeslice or mps")
	f.Float64SliceVar(&sc.TrainingPct, "pct", nil, "mps: training active-thread percentage; once for every job, or once per --training in order (default 100)")
	f.Float64Var(&sc.InferencePct, "inference-pct", 100, "mps: the inference server's active-thread percentage")
	f.IntVar(&sc.DeviceSMs, "sms", 0, "mps: the GPU's SM count that percentages round to (default: the calibration's, else the inference profile's)")
	f.Float64SliceVar(&rates, "rate", nil, "request rate in req/s; once for every service, or once per --inference in order")
	f.Float64SliceVar(&loads, "load", nil, "request rate as a fraction of solo capacity, in (0,1); once for every service, or once per --inference")
	f.Float64SliceVar(&bursts, "burst-steps", nil, "LLM engine: mean burst of back-to-back steps (the profile is one step); once for every service, or once per --inference (0: a request service)")
	f.IntVar(&sc.Requests, "requests", predictor.DefaultRequests, "simulated requests")
	f.Uint64Var(&sc.Seed, "seed", 1, "arrival seed")
	f.Float64Var(&sc.Confidence, "confidence", predictor.DefaultConfidence, "level of the intervals printed beside each figure, in [0.5, 1)")
	f.StringVar(&calPath, "calibration", "", "calibration file (default: the preset for the inference profile's GPU, else the built-in values; neither is fitted)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&sweepOn, "sweep", false, "mps, one training job: the first service's p99 at every --sweep-step of the job's percentage, as a chart with the SLO and the percentage chosen")
	f.IntVar(&sweepStep, "sweep-step", 5, "with --sweep: the step between percentages")
	f.StringVar(&svgPath, "svg", "", "with --sweep: also draw the chart as SVG into this file")
	f.Float64Var(&sloMS, "slo-p99-ms", 0, "with --sweep: the service's p99 SLO (the step p99 for an engine), in ms")
	cmd.MarkFlagsMutuallyExclusive("rate", "load")
	return cmd
}
