package predictor

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteText writes the prediction as tables a person reads (colocd
// predict): each service's rate and the device's parameters, each
// service's latency and service time, solo and co-located with their
// intervals, and each training job's iteration time. cal is the
// calibration it was predicted with.
func (p *Prediction) WriteText(w io.Writer, cal *Calibration) error {
	for _, in := range p.Services {
		if in.BurstSteps > 0 {
			fmt.Fprintf(w, "%s (engine) at %.2f steps/s (busy %.2f of the time, bursts of %g steps), %d steps, mode %s\n",
				in.Name, in.RateRPS, in.Load, in.BurstSteps, in.Requests, p.Mode)
			continue
		}
		fmt.Fprintf(w, "%s at %.2f req/s (load %.2f of solo capacity), %d requests, mode %s\n", in.Name, in.RateRPS, in.Load, in.Requests, p.Mode)
	}
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
			fmt.Fprintf(w, "note: %d ops had no DRAM/L2 intensities; estimated from kernel names (docs/md)\n", m.EstimatedOps)
		}
	}
	fmt.Fprintf(w, "calibration: %s\n", cal.Source)
	if p.Blend != nil {
		fmt.Fprintf(w, "blend: %g × the simulator + %g × the naive slowdown (solo × the calibration's ratio), as the calibration chose by held-out error\n", *p.Blend, 1-*p.Blend)
	}
	for _, in := range p.Services {
		if err := in.writeText(w, len(p.Services) > 1); err != nil {
			return err
		}
	}
	if len(p.Training) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "training\tsolo iteration ms\tco-located ms\tslowdown\tthroughput\titerations/s")
	for _, t := range p.Training {
		fmt.Fprintf(tw, "%s\t%17s\t%13s\t%7.3fx\t%9.1f %%\t%12s\n", t.Name, msOrDash(t.SoloIterationMS), msOrDash(t.IterationMS), t.Slowdown,
			100*t.Throughput, msOrDash(t.IterationsPerS))
	}
	return tw.Flush()
}

// writeText writes one service's table (named, when there are several).
func (in *InferencePrediction) writeText(w io.Writer, named bool) error {
	fmt.Fprintln(w)
	title := "inference (ms)"
	if named {
		title = in.Name + " (ms)"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t\t    mean\t     p50\t     p90\t     p95\t     p99\n", title)
	row := func(what, when string, q Percentiles) {
		fmt.Fprintf(tw, "%s\t%s\t%8.3f\t%8.3f\t%8.3f\t%8.3f\t%8.3f\n", what, when, q.Mean, q.P50, q.P90, q.P95, q.P99)
	}
	span := func(when string, iv Intervals) {
		var cells []string
		for _, k := range PercentileKeys {
			r, _ := iv.Get(k)
			cells = append(cells, fmt.Sprintf("%.3f–%.3f", r[0], r[1]))
		}
		fmt.Fprintf(tw, "\t%s\t%s\n", when, strings.Join(cells, "\t"))
	}
	ivName := fmt.Sprintf("%g %% interval", 100*in.LatencyInterval.Confidence)
	switch {
	case in.ParameterUncertainty && in.ModelUncertainty:
		ivName += " (with the calibration's and the model's error)"
	case in.ParameterUncertainty:
		ivName += " (with the calibration's)"
	case in.ModelUncertainty:
		ivName += " (with the model's error)"
	}
	row("latency", "solo", in.SoloLatencyMS)
	row("latency", "co-located", in.LatencyMS)
	span(ivName, in.LatencyInterval)
	service := "service"
	if in.BurstSteps > 0 {
		service = "step"
	}
	row(service, "solo", in.SoloServiceMS)
	row(service, "co-located", in.ServiceMS)
	span(ivName, in.ServiceInterval)
	return tw.Flush()
}

func msOrDash(v *float64) string {
	if v == nil || math.IsInf(*v, 0) {
		return "—"
	}
	return fmt.Sprintf("%.3f", *v)
}
