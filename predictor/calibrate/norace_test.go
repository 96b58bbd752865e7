//go:build slow && !race

// The calibration's fits that decide whether it finds the truth: numeric,
// each from tens of seconds to minutes of CPU under the race detector,
// which they would only slow (TestFitCancelled and TestFitMPSZeroTruth run
// the fits' concurrent evaluation of records under it). go test -race
// leaves this file out; a run without -race includes it.
// They also carry the slow tag: a minute of CPU, which a plain go test ./...
// leaves to make test (go test -tags slow runs them).

package calibrate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// The fit recovers the parameters from records measured on other arrivals
// than it simulates (1 % noise on top): it reaches the truth's loss or
// better, each parameter's reported 95 % interval holds the truth, and the
// slice, which the records pin sharply, is within 5 %.
func TestFitTimesliceRecoversParameters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		truth predictor.TimesliceParams
		// prior lists the parameters the records may leave to the prior:
		// when the switch is a small fraction of the slice the trainers
		// mostly see what each inference visit costs them, 2·switch +
		// hold-over, and cannot tell how it splits.
		prior []string
		cv    bool
	}{
		{"switch 15% of slice", predictor.TimesliceParams{SliceUS: 1000, SwitchUS: 150, HoldoverUS: 300}, nil, true},
		{"switch 4% of slice", predictor.TimesliceParams{SliceUS: 2000, SwitchUS: 80, HoldoverUS: 400}, []string{"switch_us"}, false},
		// Each parameter 1.3–2.2 standard deviations from the prior's
		// centre, the switch above its documented range: the records
		// must win over the prior.
		{"truth far from the prior's centre", predictor.TimesliceParams{SliceUS: 4000, SwitchUS: 300, HoldoverUS: 900}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := syntheticMeasurements(t, tt.truth, 0.01, calibrationRecords())
			cal, err := FitTimeslice(context.Background(), m, FitOptions{CrossValidate: tt.cv})
			if err != nil {
				t.Fatal(err)
			}
			got := cal.Timeslice
			obj := newTSObjective(context.Background(), m.recordsOf(predictor.ModeTimeslice), FitOptions{Seed: 1})
			if lt, lf := obj.loss(tt.truth, nil), obj.loss(*got, nil); lf > lt {
				t.Errorf("loss at the fit %.5f, above the truth's %.5f: the search stopped short", lf, lt)
			}
			truth := []float64{tt.truth.SliceUS, tt.truth.SwitchUS, tt.truth.HoldoverUS}
			if len(cal.Fit.Parameters) != 3 {
				t.Fatalf("%d parameter reports, want 3", len(cal.Fit.Parameters))
			}
			for i, p := range cal.Fit.Parameters {
				t.Logf("%s %.1f [%s, %s] pinned by %s", p.Name, p.Value, deref(p.Low), deref(p.High), p.PinnedBy)
				if (p.Low != nil && truth[i] < *p.Low) || (p.High != nil && truth[i] > *p.High) {
					t.Errorf("%s: the truth %.1f is outside the 95 %% interval [%s, %s]", p.Name, truth[i], deref(p.Low), deref(p.High))
				}
				if want := predictor.PinnedByRecords; p.PinnedBy != want && !slices.Contains(tt.prior, p.Name) {
					t.Errorf("%s pinned by %s, want %s", p.Name, p.PinnedBy, want)
				}
			}
			if d := math.Abs(got.SliceUS-tt.truth.SliceUS) / tt.truth.SliceUS; d > 0.05 {
				t.Errorf("slice_us = %.1f, truth %.1f: %.0f%% off, want ≤ 5%%", got.SliceUS, tt.truth.SliceUS, 100*d)
			}
			// 1 % noise and the simulation's own (600 requests, three
			// seeds, against other arrivals): a few per cent.
			if cal.Fit.MAPE > 0.03 {
				t.Errorf("in-sample MAPE %.4f, want ≤ 0.03", cal.Fit.MAPE)
			}
			// Leave-one-workload-out over three workloads: each left out
			// takes part of what pins the parameters with it (the gappy
			// trainer the hold-over, the two solid ones switch against
			// slice), so its records miss by more than the noise (5.2 %
			// against 1.9 % in-sample), but not by a model's error.
			if tt.cv && (cal.Fit.CVMAPE == nil || cal.Fit.CV != "leave-one-workload-out" || *cal.Fit.CVMAPE > 0.08) {
				t.Errorf("cross-validated MAPE %v (%s), want reported leave-one-workload-out and ≤ 0.08", cal.Fit.CVMAPE, cal.Fit.CV)
			}
			if cal.Fit.Metrics != 8*5+6 || len(cal.Fit.PerRecord) != 9 || cal.Fit.Seeds != DefaultSeeds {
				t.Errorf("fit counted %d metrics over %d records with %d seeds, want 46 over 9 with %d", cal.Fit.Metrics, len(cal.Fit.PerRecord), cal.Fit.Seeds, DefaultSeeds)
			}
			if len(cal.Fit.Warnings) > 0 {
				t.Errorf("warnings %q on nine records", cal.Fit.Warnings)
			}
			t.Logf("fitted %+v, MAPE %.4f, %d evaluations", *got, cal.Fit.MAPE, cal.Fit.Evaluations)
		})
	}
}

// Two records, one trainer: three parameters cannot be pinned. The fit
// warns, and every parameter the records leave open is reported as set by
// the prior; without the prior, by nothing.
func TestFitTimesliceFewRecords(t *testing.T) {
	t.Parallel()
	short := jitteredProfile("short", predictor.KindInference, 4, 100, 10, 0.5, 1)
	busy := jitteredProfile("busy", predictor.KindTraining, 40, 250, 20, 0.5, 3)
	var recs []Record
	for _, load := range []float64{0.1, 0.3} {
		recs = append(recs, Record{Name: "short+busy", Mode: predictor.ModeTimeslice,
			Inference: ProfileRef{Profile: short}, Training: []ProfileRef{{Profile: busy}},
			RateRPS: load * 1e6 / short.SoloUS(), Requests: 300})
	}
	m := syntheticMeasurements(t, predictor.TimesliceParams{SliceUS: 1000, SwitchUS: 150, HoldoverUS: 300}, 0.01, recs)
	for _, tt := range []struct {
		name    string
		noPrior bool
		by      string
	}{{"with the prior", false, predictor.PinnedByPrior}, {"without", true, predictor.PinnedByNone}} {
		t.Run(tt.name, func(t *testing.T) {
			cal, err := FitTimeslice(context.Background(), m, FitOptions{NoPrior: tt.noPrior, MaxEvaluations: 60})
			if err != nil {
				t.Fatal(err)
			}
			if len(cal.Fit.Warnings) == 0 || !strings.Contains(cal.Fit.Warnings[0], "2 records with 10 weighted metrics for 3 parameters: too few") {
				t.Errorf("warnings = %q, want one about too few records", cal.Fit.Warnings)
			}
			if (cal.Fit.Prior == nil) != tt.noPrior {
				t.Errorf("prior reported = %v, want reported: %v", cal.Fit.Prior, !tt.noPrior)
			}
			var open []string
			for _, p := range cal.Fit.Parameters {
				if p.PinnedBy != predictor.PinnedByRecords {
					open = append(open, p.Name)
					if p.PinnedBy != tt.by {
						t.Errorf("%s pinned by %s, want %s or records", p.Name, p.PinnedBy, tt.by)
					}
				}
			}
			if len(open) == 0 || !slices.Equal(open, cal.Fit.Unidentified) {
				t.Errorf("parameters left open %v, unidentified %v: want the same, not empty", open, cal.Fit.Unidentified)
			}
		})
	}
}

// The fit recovers the MPS coefficients from records with 1 % noise: each
// within 5 % of the truth, each 95 % interval holding it, and a
// leave-one-workload-out figure that is the same for the same seed.
func TestFitMPSRecoversCoefficients(t *testing.T) {
	t.Parallel()
	truth := predictor.MPSParams{DRAM: 0.6, L2: 0.3, Kernels: 0.15}
	m := syntheticMPSMeasurements(t, truth, 0.01, mpsCalibrationRecords())
	cal, err := FitMPS(context.Background(), m, FitOptions{CrossValidate: true})
	if err != nil {
		t.Fatal(err)
	}
	got := cal.Params()
	for i, name := range predictor.MPSFeatures {
		g, w := got.Vector()[i], truth.Vector()[i]
		if math.Abs(g-w)/w > 0.05 {
			t.Errorf("%s = %.4f, truth %.4f (more than 5%% off)", name, g, w)
		}
	}
	if cal.Fit.MAPE > 0.02 {
		t.Errorf("in-sample MAPE %.4f, want ≤ 0.02 with 1 %% noise", cal.Fit.MAPE)
	}
	// Each coefficient's 95 % interval holds the truth, and these records
	// pin every one.
	if len(cal.Fit.Parameters) != len(predictor.MPSFeatures) {
		t.Fatalf("%d parameter reports, want %d", len(cal.Fit.Parameters), len(predictor.MPSFeatures))
	}
	for i, p := range cal.Fit.Parameters {
		w := truth.Vector()[i]
		if p.Name != predictor.MPSFeatures[i] || p.Low == nil || p.High == nil || !(*p.Low <= w && w <= *p.High) || p.PinnedBy != predictor.PinnedByRecords {
			t.Errorf("%s %.4f in [%s, %s] pinned by %s: want the truth %.2f inside, pinned by records", p.Name, p.Value, deref(p.Low), deref(p.High), p.PinnedBy, w)
		}
		t.Logf("%s %.4f [%s, %s]", p.Name, p.Value, deref(p.Low), deref(p.High))
	}
	if cal.Fit.CVMAPE == nil || cal.Fit.CV != "leave-one-workload-out" {
		t.Fatalf("cross-validation not reported: %+v", cal.Fit)
	}
	// Stable for a fixed seed: the same fit again gives the same figure.
	again, err := FitMPS(context.Background(), syntheticMPSMeasurements(t, truth, 0.01, mpsCalibrationRecords()), FitOptions{CrossValidate: true})
	if err != nil {
		t.Fatal(err)
	}
	if *again.Fit.CVMAPE != *cal.Fit.CVMAPE {
		t.Errorf("leave-one-workload-out MAPE %v then %v for the same seed", *cal.Fit.CVMAPE, *again.Fit.CVMAPE)
	}
	t.Logf("fitted %+v, MAPE %.4f, leave-one-workload-out %.4f, %d evaluations", got, cal.Fit.MAPE, *cal.Fit.CVMAPE, cal.Fit.Evaluations)
}

// Time-slicing cross-validation leaves out one training workload at a
// time: each record's cross-validated prediction is the one a fit on the
// other workload's records alone makes of it. Records of one workload are
// left out one at a time instead.
func TestFitTimesliceCrossValidatesByWorkload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	truth := predictor.TimesliceParams{SliceUS: 1000, SwitchUS: 150, HoldoverUS: 300}
	var busy, gappy []Record
	for _, r := range calibrationRecords() {
		if r.Inference.Profile.Name != "short" {
			continue // two records per trainer are enough, and cheaper
		}
		switch r.workloadKey() {
		case "busy":
			busy = append(busy, r)
		case "gappy":
			gappy = append(gappy, r)
		}
	}
	opts := FitOptions{Seeds: 1, MaxEvaluations: 30}
	cvOpts := opts
	cvOpts.CrossValidate = true
	m := syntheticMeasurements(t, truth, 0.01, append(slices.Clone(busy), gappy...))
	cal, err := FitTimeslice(ctx, m, cvOpts)
	if err != nil {
		t.Fatal(err)
	}
	if cal.Fit.CV != "leave-one-workload-out" || cal.Fit.CVMAPE == nil {
		t.Fatalf("cv %q, cv_mape %v; want leave-one-workload-out", cal.Fit.CV, cal.Fit.CVMAPE)
	}
	t.Logf("MAPE in-sample %.4f, leave-one-workload-out %.4f", cal.Fit.MAPE, *cal.Fit.CVMAPE)
	// The gappy trainer's records, as a fit on the busy trainer's predicts them.
	alone, err := FitTimeslice(ctx, &Measurements{Format: MeasurementsFormat, Device: m.Device, Records: m.Records[:len(busy)]}, opts)
	if err != nil {
		t.Fatal(err)
	}
	obj := newTSObjective(ctx, m.recordsOf(predictor.ModeTimeslice), opts)
	obj.opts.Seed = 1
	preds, err := obj.predictAll(*alone.Timeslice, func(i int) bool { return i < len(busy) })
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i := len(busy); i < len(m.Records); i++ {
		for j, mt := range obj.metrics[i] {
			cv := cal.Fit.PerRecord[i].Metrics[j].CVPredicted
			if want := mt.predicted(preds[i]); cv == nil || math.Abs(*cv-want) > 1e-9*want {
				t.Fatalf("%s %s: cross-validated %v, want %v (a fit on the busy trainer alone)", m.Records[i].Name, mt.field(), cv, want)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no metric of the gappy trainer's records was checked")
	}
	one, err := FitTimeslice(ctx, syntheticMeasurements(t, truth, 0.01, busy), cvOpts)
	if err != nil {
		t.Fatal(err)
	}
	if one.Fit.CV != "leave-one-record-out" || one.Fit.CVMAPE == nil {
		t.Errorf("one workload: cv %q, cv_mape %v; want leave-one-record-out", one.Fit.CV, one.Fit.CVMAPE)
	}
}

func deref(p *float64) string {
	if p == nil {
		return "open"
	}
	return fmt.Sprintf("%.4g", *p)
}
