package calibrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/colocd/colocd/predictor"
)

// FitAll fits each mode that has records (FitTimeslice, FitMPS) and returns
// one calibration with a section per mode fitted; progress hears what runs
// and how long it took.
func FitAll(ctx context.Context, m *Measurements, opts FitOptions, progress io.Writer) (*predictor.Calibration, error) {
	cal := &predictor.Calibration{Format: predictor.CalibrationFormat, Device: m.Device}
	var fitted bool
	// A fit simulates every record many times (and, cross-validated, again
	// per workload or record left out): say what runs, and how long it took.
	step := func(mode predictor.Mode, what string) func() {
		recs := m.recordsOf(mode)
		n := len(recs)
		if n == 0 {
			return func() {}
		}
		cv := ""
		if g := len(workloadGroups(recs)); opts.CrossValidate && g > 1 {
			cv = fmt.Sprintf(", then %d leave-one-workload-out refits", g)
		} else if opts.CrossValidate && mode == predictor.ModeTimeslice && n > 1 {
			cv = fmt.Sprintf(", then %d leave-one-record-out refits", n)
		}
		fmt.Fprintf(progress, "colocd calibrate: fitting %s on %d records%s…\n", what, n, cv)
		start := time.Now()
		return func() {
			fmt.Fprintf(progress, "colocd calibrate: %s done in %s\n", what, time.Since(start).Round(100*time.Millisecond))
		}
	}
	done := step(predictor.ModeTimeslice, "time slicing")
	ts, err := FitTimeslice(ctx, m, opts)
	done()
	if err == nil {
		cal.Timeslice, cal.Fit, cal.Blend, fitted = ts.Timeslice, ts.Fit, ts.Blend, true
	} else if !errors.Is(err, ErrNoRecords) {
		return nil, err
	}
	done = step(predictor.ModeMPS, "mps")
	mp, err := FitMPS(ctx, m, opts)
	done()
	if err == nil {
		cal.MPS, fitted = mp, true
	} else if !errors.Is(err, ErrNoRecords) {
		return nil, err
	}
	if !fitted {
		return nil, fmt.Errorf("%w: no record has mode timeslice or mps", ErrNoRecords)
	}
	return cal, nil
}

// WriteReport writes, for a person, where the calibration went (out), the
// fitted values, each parameter's interval and prior, and a per-metric
// table of each mode fitted.
func WriteReport(w io.Writer, cal *predictor.Calibration, out string) error {
	fmt.Fprintf(w, "%s → %s\n", cal.Source, out)
	if ts := cal.Timeslice; ts != nil && cal.Fit != nil {
		fmt.Fprintf(w, "\ntime slicing: slice %.1f µs, switch %.1f µs, hold-over %.1f µs\n", ts.SliceUS, ts.SwitchUS, ts.HoldoverUS)
		if len(cal.Fit.Unidentified) > 0 {
			fmt.Fprintf(w, "not identified by these records: %s\n", strings.Join(cal.Fit.Unidentified, ", "))
		}
		if err := printParameters(w, cal.Fit); err != nil {
			return err
		}
		if err := printFit(w, cal.Fit); err != nil {
			return err
		}
		printBlend(w, "time slicing", cal.Blend)
	}
	if m := cal.MPS; m != nil && m.Fit != nil {
		c := m.Params()
		fmt.Fprintf(w, "\nmps: contention dram %.4f, l2 %.4f, kernels %.4f\n", c.DRAM, c.L2, c.Kernels)
		if err := printParameters(w, m.Fit); err != nil {
			return err
		}
		if err := printFit(w, m.Fit); err != nil {
			return err
		}
		printBlend(w, "mps", m.Blend)
	}
	return nil
}

// printBlend writes the held-out error of the simulator, the naive
// slowdown and the blend chosen, and every weight tried.
func printBlend(w io.Writer, mode string, b *predictor.Blend) {
	if b == nil || b.CVMAPE == nil {
		return
	}
	cv := b.CVMAPE
	fmt.Fprintf(w, "\n%s, held out (%s, %d metrics): simulator %.2f %%, naive slowdown %.2f %%, blend %.2f %% (each fold's weight chosen on the other folds: %s)\n",
		mode, b.CV, cv.Metrics, 100*cv.Simulator, 100*cv.Naive, 100*cv.Blend, fmtWeights(b.FoldWeights))
	var grid []string
	for _, p := range b.Grid {
		grid = append(grid, fmt.Sprintf("%g: %.2f %%", p.Weight, 100*p.CVMAPE))
	}
	fmt.Fprintf(w, "blend chosen: simulator weight %g (by weight, over every fold: %s)\n", b.SimulatorWeight(), strings.Join(grid, ", "))
	var ratios []string
	for _, k := range slices.Sorted(maps.Keys(b.NaiveRatio)) {
		ratios = append(ratios, fmt.Sprintf("%s ×%.3f", k, b.NaiveRatio[k]))
	}
	fmt.Fprintf(w, "naive slowdown, measured / solo: %s\n", strings.Join(ratios, ", "))
}

func fmtWeights(ws []float64) string {
	parts := make([]string, len(ws))
	for i, v := range ws {
		parts[i] = fmt.Sprintf("%g", v)
	}
	return strings.Join(parts, ", ")
}

// printFit writes a fit's MAPE line and its per-metric table.
func printFit(w io.Writer, fit *predictor.FitReport) error {
	fmt.Fprintf(w, "%d records, %d metrics: MAPE in-sample %.2f %%", fit.Records, fit.Metrics, 100*fit.MAPE)
	if fit.CVMAPE != nil {
		fmt.Fprintf(w, ", %s %.2f %%", fit.CV, 100**fit.CVMAPE)
	}
	seeds := "seeds"
	if fit.Seeds == 1 {
		seeds = "seed"
	}
	fmt.Fprintf(w, " (%d model evaluations, %d %s per record)\n", fit.Evaluations, fit.Seeds, seeds)
	if len(fit.Weights) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(fit.Weights)) {
			parts = append(parts, fmt.Sprintf("%s=%g", k, fit.Weights[k]))
		}
		fmt.Fprintf(w, "objective weights: %s\n", strings.Join(parts, ", "))
	}
	for _, warn := range fit.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "record\tmetric\tmeasured\tpredicted\terror\tleft-out predicted\tleft-out error")
	for _, r := range fit.PerRecord {
		for _, m := range r.Metrics {
			cvp, cve := "—", "—"
			if m.CVPredicted != nil {
				cvp, cve = fmt.Sprintf("%.3f", *m.CVPredicted), pctErr(*m.CVPredicted, m.Measured)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%s\t%s\t%s\n", r.Name, m.Field, m.Measured, m.Predicted, pctErr(m.Predicted, m.Measured), cvp, cve)
		}
	}
	return tw.Flush()
}

// printParameters writes each fitted parameter with its 95 % interval,
// what pins it and its prior.
func printParameters(w io.Writer, fit *predictor.FitReport) error {
	if len(fit.Parameters) == 0 {
		return nil
	}
	bound := func(v *float64) string {
		if v == nil {
			return "open"
		}
		return fmt.Sprintf("%.4g", *v)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "parameter	value	95 % interval	pinned by	prior (median, ±2 sd)")
	for _, p := range fit.Parameters {
		prior := "none"
		if t, ok := fit.Prior[p.Name]; ok {
			prior = fmt.Sprintf("%.0f (%.0f – %.0f)", t.Centre, t.Centre*math.Exp(-2*t.LogSD), t.Centre*math.Exp(2*t.LogSD))
		}
		fmt.Fprintf(tw, "%s\t%.4g\t%s – %s\t%s\t%s\n", p.Name, p.Value, bound(p.Low), bound(p.High), p.PinnedBy, prior)
	}
	return tw.Flush()
}

func pctErr(pred, meas float64) string {
	if math.IsNaN(pred) {
		return "—"
	}
	return fmt.Sprintf("%+.1f %%", 100*(pred-meas)/meas)
}
