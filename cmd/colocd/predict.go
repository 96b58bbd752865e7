package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/colocd/colocd/predictor"
	"github.com/spf13/cobra"
)

func newPredictCmd() *cobra.Command {
	var (
		infPath, mode, calPath string
		trainPaths             []string
		sc                     predictor.Scenario
		asJSON                 bool
	)
	cmd := &cobra.Command{
		Use:   "predict --inference FILE [--training FILE ...] [--mode timeslice|mps [--pct N ...]] (--rate RPS | --load F)",
		Short: "Predict inference latency under co-location",
		Long: `Predict what co-located training jobs do to an inference service's latency.

Requests arrive by a seeded Poisson process at --rate (req/s) or at --load, a
fraction of the service's solo capacity. The output gives, for the inference
service, latency_ms (arrival to completion: what SLOs are written on) and
service_ms (start of execution to completion), solo and co-located, and each
training job's iteration time. Under --mode mps every context runs at once,
each training job limited to its --pct active-thread percentage. The device
parameters come from --calibration, else the preset for the inference
profile's GPU, else the built-in default. See docs/predictor.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cal, err := loadScenario(&sc, predictor.Mode(mode), infPath, trainPaths, calPath)
			if err != nil {
				return err
			}
			var pr predictor.Predictor
			pred, err := pr.Predict(&sc, predictor.Mode(mode), cal)
			if err != nil {
				return fmt.Errorf("predict: %w", err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), pred)
			}
			return printPrediction(cmd.OutOrStdout(), pred, cal)
		},
	}
	f := cmd.Flags()
	f.StringVar(&infPath, "inference", "", "inference profile (required)")
	f.StringArrayVar(&trainPaths, "training", nil, "training profile (repeat for several jobs)")
	f.StringVar(&mode, "mode", string(predictor.ModeTimeslice), "GPU sharing mode: timeslice or mps")
	f.Float64SliceVar(&sc.TrainingPct, "pct", nil, "mps: training active-thread percentage; once for every job, or once per --training in order (default 100)")
	f.Float64Var(&sc.InferencePct, "inference-pct", 100, "mps: the inference server's active-thread percentage")
	f.IntVar(&sc.DeviceSMs, "sms", 0, "mps: the GPU's SM count that percentages round to (default: the calibration's, else the inference profile's)")
	f.Float64Var(&sc.RateRPS, "rate", 0, "request rate in req/s")
	f.Float64Var(&sc.Load, "load", 0, "request rate as a fraction of solo capacity, in (0,1)")
	f.IntVar(&sc.Requests, "requests", predictor.DefaultRequests, "simulated requests")
	f.Uint64Var(&sc.Seed, "seed", 1, "arrival seed")
	f.Float64Var(&sc.Confidence, "confidence", predictor.DefaultConfidence, "level of the intervals printed beside each figure, in [0.5, 1)")
	f.StringVar(&calPath, "calibration", "", "calibration file (default: the preset for the inference profile's GPU, else the built-in values; neither is fitted)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagsMutuallyExclusive("rate", "load")
	return cmd
}

// loadScenario checks the flags, loads the profiles into sc and returns the
// calibration to predict with.
func loadScenario(sc *predictor.Scenario, mode predictor.Mode, infPath string, trainPaths []string, calPath string) (*predictor.Calibration, error) {
	if infPath == "" {
		return nil, errors.New("predict: --inference: want the path of an inference profile")
	}
	switch mode {
	case predictor.ModeTimeslice:
		if len(sc.TrainingPct) > 0 || sc.InferencePct != 100 {
			return nil, errors.New("predict: --pct and --inference-pct: want --mode mps (time slicing has no percentages)")
		}
	case predictor.ModeMPS:
	default:
		return nil, fmt.Errorf("predict: --mode: want timeslice or mps, got %q", mode)
	}
	inf, err := predictor.LoadProfile(infPath)
	if err != nil {
		return nil, fmt.Errorf("predict: --inference: %w", err)
	}
	sc.Inference = inf
	cal, err := predictor.ResolveCalibration(calPath, inf.Device.Name)
	if err != nil {
		return nil, fmt.Errorf("predict: --calibration: %w", err)
	}
	if sc.DeviceSMs == 0 {
		sc.DeviceSMs = cal.Device.SMs
	}
	for _, p := range trainPaths {
		t, err := predictor.LoadProfile(p)
		if err != nil {
			return nil, fmt.Errorf("predict: --training: %w", err)
		}
		sc.Training = append(sc.Training, t)
	}
	if sc.Requests <= 0 {
		return nil, fmt.Errorf("predict: --requests: want a count ≥ 1, got %d", sc.Requests)
	}
	return cal, nil
}

// printPrediction writes the prediction as a table a person reads.
func printPrediction(w io.Writer, p *predictor.Prediction, cal *predictor.Calibration) error {
	in := p.Inference
	fmt.Fprintf(w, "%s at %.2f req/s (load %.2f of solo capacity), %d requests, mode %s\n", in.Name, in.RateRPS, in.Load, in.Requests, p.Mode)
	if ts := p.Timeslice; ts != nil {
		fmt.Fprintf(w, "device: slice %.0f µs, switch %.0f µs, hold-over %.0f µs\n", ts.SliceUS, ts.SwitchUS, ts.HoldoverUS)
	}
	if m := p.MPS; m != nil {
		pcts := make([]string, len(m.TrainingPct))
		for i, v := range m.TrainingPct {
			pcts[i] = fmt.Sprintf("%g %%", v)
		}
		c := m.Coefficients
		fmt.Fprintf(w, "mps: inference %g %%, training [%s] of %d SMs; contention dram %.3g, l2 %.3g, kernels %.3g\n",
			m.InferencePct, strings.Join(pcts, ", "), m.SMs, c.DRAM, c.L2, c.Kernels)
		if m.EstimatedOps > 0 {
			fmt.Fprintf(w, "note: %d ops had no DRAM/L2 intensities; estimated from kernel names (docs/predictor.md)\n", m.EstimatedOps)
		}
	}
	fmt.Fprintf(w, "calibration: %s\n\n", cal.Source)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "inference (ms)\t\t    mean\t     p50\t     p90\t     p95\t     p99")
	row := func(what, when string, q predictor.Percentiles) {
		fmt.Fprintf(tw, "%s\t%s\t%8.3f\t%8.3f\t%8.3f\t%8.3f\t%8.3f\n", what, when, q.Mean, q.P50, q.P90, q.P95, q.P99)
	}
	span := func(when string, iv predictor.Intervals) {
		var cells []string
		for _, k := range predictor.PercentileKeys {
			r, _ := iv.Get(k)
			cells = append(cells, fmt.Sprintf("%.3f–%.3f", r[0], r[1]))
		}
		fmt.Fprintf(tw, "\t%s\t%s\n", when, strings.Join(cells, "\t"))
	}
	ivName := fmt.Sprintf("%g %% interval", 100*in.LatencyInterval.Confidence)
	if in.ParameterUncertainty {
		ivName += " (with the calibration's)"
	}
	row("latency", "solo", in.SoloLatencyMS)
	row("latency", "co-located", in.LatencyMS)
	span(ivName, in.LatencyInterval)
	row("service", "solo", in.SoloServiceMS)
	row("service", "co-located", in.ServiceMS)
	span(ivName, in.ServiceInterval)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Training) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "training\tsolo iteration ms\tco-located ms\tslowdown")
	for _, t := range p.Training {
		fmt.Fprintf(tw, "%s\t%17s\t%13s\t%7.3fx\n", t.Name, msOrDash(t.SoloIterationMS), msOrDash(t.IterationMS), t.Slowdown)
	}
	return tw.Flush()
}

func msOrDash(v *float64) string {
	if v == nil || math.IsInf(*v, 0) {
		return "—"
	}
	return fmt.Sprintf("%.3f", *v)
}
