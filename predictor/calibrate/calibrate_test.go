package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
)

// syntheticMeasurements predicts each record with truth and stores the result,
// perturbed by multiplicative Gaussian noise of relative size noise, as the
// record's measurement. A measurement is one long run, not the fit's
// arrivals: the mean over eight seeds the fit never uses stands in for it.
func syntheticMeasurements(t *testing.T, truth predictor.TimesliceParams, noise float64, recs []Record) *Measurements {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	jitter := func(v float64) float64 { return v * (1 + noise*rng.NormFloat64()) }
	var pr predictor.Predictor
	for i := range recs {
		r := &recs[i]
		sc := &predictor.Scenario{Inference: r.Inference.Profile, RateRPS: r.RateRPS, Requests: r.Requests, Seed: 1001}
		for _, tp := range r.Training {
			sc.Training = append(sc.Training, tp.Profile)
		}
		pred, err := predictSeeds(FitOptions{Seeds: 8}, sc, func(sc *predictor.Scenario) (*predictor.Prediction, error) { return pr.PredictTimeslice(sc, truth) })
		if err != nil {
			t.Fatal(err)
		}
		lat, svc := pred.Inference.LatencyMS, pred.Inference.ServiceMS
		r.Measured = Measured{
			LatencyMS: map[string]float64{"mean": jitter(lat.Mean), "p90": jitter(lat.P90), "p99": jitter(lat.P99)},
			ServiceMS: map[string]float64{"mean": jitter(svc.Mean)},
		}
		for _, tr := range pred.Training {
			r.Measured.TrainingIterationMS = append(r.Measured.TrainingIterationMS, jitter(*tr.IterationMS))
		}
	}
	return &Measurements{Format: MeasurementsFormat, Records: recs}
}

// jitteredProfile is uniformProfile with each duration and gap drawn
// uniformly from ±spread around the given values, as real kernels vary;
// identical kernels make the simulation resonate with the slice length.
func jitteredProfile(name string, kind predictor.Kind, n int, durUS, gapUS, spread float64, seed uint64) *predictor.Profile {
	p := uniformProfile(name, kind, n, durUS, gapUS)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range p.Ops {
		p.Ops[i].DurUS *= 1 + spread*(2*rng.Float64()-1)
		p.Ops[i].GapUS *= 1 + spread*(2*rng.Float64()-1)
	}
	return p
}

func calibrationRecords() []Record {
	short := jitteredProfile("short", predictor.KindInference, 4, 100, 10, 0.5, 1)  // ≈ 0.44 ms
	long := jitteredProfile("long", predictor.KindInference, 8, 300, 150, 0.5, 2)   // ≈ 3.6 ms, gaps below the hold-over
	busy := jitteredProfile("busy", predictor.KindTraining, 40, 250, 20, 0.5, 3)    // ≈ 10.8 ms
	gappy := jitteredProfile("gappy", predictor.KindTraining, 20, 500, 600, 0.9, 4) // ≈ 22 ms, gaps around the hold-over
	var recs []Record
	for _, inf := range []*predictor.Profile{short, long} {
		for _, tr := range []*predictor.Profile{busy, gappy} {
			// Light and heavy load; at the heavy one the short service
			// switches over a thousand times a second, which pins down
			// switch_us. Heavier, the service nears saturation under the
			// trainer, where a few per cent of slice moves its mean by
			// half: records there make the error surface too rugged to
			// search, and would be as noisy to measure.
			for _, load := range []float64{0.1, 0.3} {
				rate := load * 1e6 / inf.SoloUS()
				recs = append(recs, Record{
					Name: inf.Name + "+" + tr.Name, Mode: predictor.ModeTimeslice,
					Inference: ProfileRef{Profile: inf}, Training: []ProfileRef{{Profile: tr}},
					RateRPS: rate, Requests: 600,
				})
			}
		}
	}
	// Two trainers that never idle: every slice ends in a switch between
	// them, so their iteration time fixes switch_us / slice_us apart from
	// the hold-over, which the other records confound with the switch.
	solid := jitteredProfile("solid", predictor.KindTraining, 40, 250, 0, 0.5, 5)
	recs = append(recs, Record{
		Name: "short+solid+solid", Mode: predictor.ModeTimeslice,
		Inference: ProfileRef{Profile: short}, Training: []ProfileRef{{Profile: solid}, {Profile: solid}},
		RateRPS: 0.1 * 1e6 / short.SoloUS(), Requests: 600,
	})
	return recs
}

// The fit recovers the parameters from records measured on other arrivals
// than it simulates (1 % noise on top): it reaches the truth's loss or
// better, each parameter's reported 95 % interval holds the truth, and the
// slice, which the records pin sharply, is within 5 %.
func TestFitTimesliceRecoversParameters(t *testing.T) {
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
			// Under the race detector one fit takes minutes on two cores:
			// make test runs this test again without the race detector,
			// and TestFitCancelled puts the fit's concurrent evaluation
			// of the same nine records under it.
			if raceEnabled {
				t.Skip("too slow under the race detector; make test runs it without")
			}
			m := syntheticMeasurements(t, tt.truth, 0.01, calibrationRecords())
			cal, err := FitTimeslice(context.Background(), m, FitOptions{CrossValidate: tt.cv})
			if err != nil {
				t.Fatal(err)
			}
			got := cal.Timeslice
			obj := newTSObjective(context.Background(), m.recordsOf(predictor.ModeTimeslice), FitOptions{Seed: 1})
			if lt, lf := obj.loss(tt.truth, -1), obj.loss(*got, -1); lf > lt {
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
			if tt.cv && (cal.Fit.CVMAPE == nil || *cal.Fit.CVMAPE > 0.04) {
				t.Errorf("leave-one-out MAPE %v, want reported and ≤ 0.04", cal.Fit.CVMAPE)
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

// Records without training cannot see any time-slicing parameter: the fit
// still answers, and says that it could not pin any of them down.
func TestFitTimesliceReportsUnidentified(t *testing.T) {
	inf := uniformProfile("inf", predictor.KindInference, 3, 100, 20)
	recs := []Record{
		{Name: "solo", Mode: predictor.ModeTimeslice, Inference: ProfileRef{Profile: inf}, RateRPS: 500, Requests: 300},
	}
	m := syntheticMeasurements(t, predictor.TimesliceParams{SliceUS: 1000, SwitchUS: 50, HoldoverUS: 300}, 0.01, recs)
	cal, err := FitTimeslice(context.Background(), m, FitOptions{MaxEvaluations: 60})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"slice_us", "switch_us", "holdover_us"}; !slices.Equal(cal.Fit.Unidentified, want) {
		t.Errorf("unidentified = %v, want %v", cal.Fit.Unidentified, want)
	}
}

func TestFitTimesliceNoRecords(t *testing.T) {
	inf := uniformProfile("inf", predictor.KindInference, 3, 100, 0)
	m := &Measurements{Format: MeasurementsFormat, Records: []Record{{Name: "m", Mode: predictor.ModeMPS, Inference: ProfileRef{Profile: inf}, RateRPS: 5, TrainingPct: 50,
		Measured: Measured{LatencyMS: map[string]float64{"p99": 3}}}}}
	_, err := FitTimeslice(context.Background(), m, FitOptions{})
	if !errors.Is(err, ErrNoRecords) {
		t.Errorf("err = %v, want ErrNoRecords", err)
	}
}

// A cancelled calibration returns promptly with the context's error
// (colocd calibrate gets SIGTERM this way).
func TestFitCancelled(t *testing.T) {
	m := syntheticMeasurements(t, predictor.TimesliceParams{SliceUS: 1000, SwitchUS: 150, HoldoverUS: 300}, 0.01, calibrationRecords())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := FitTimeslice(ctx, m, FitOptions{CrossValidate: true})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a cancelled fit took %v to return", d)
	}
	mm := syntheticMPSMeasurements(t, predictor.MPSParams{DRAM: 0.5}, 0, mpsCalibrationRecords())
	if _, err := FitMPS(ctx, mm, FitOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("mps: err = %v, want context.Canceled", err)
	}
}

func deref(p *float64) string {
	if p == nil {
		return "open"
	}
	return fmt.Sprintf("%.4g", *p)
}
