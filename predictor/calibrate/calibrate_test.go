package calibrate

import (
	"context"
	"errors"
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

// Records without training cannot see any time-slicing parameter: the fit
// still answers, and says that it could not pin any of them down.
func TestFitTimesliceReportsUnidentified(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// A refit that holds records out scores the parameters the full fit
// evaluated without simulating them again: the records it keeps come from
// the objective's memo, and the score is the one a fresh objective gives.
// Only records never predicted at a point are simulated there.
func TestObjectiveMemoServesRefits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var recs []Record
	for _, r := range calibrationRecords() {
		if r.Inference.Profile.Name == "short" && len(r.Training) == 1 {
			recs = append(recs, r)
		}
	}
	truth := predictor.TimesliceParams{SliceUS: 1000, SwitchUS: 150, HoldoverUS: 300}
	m := syntheticMeasurements(t, truth, 0.01, recs)
	opts := FitOptions{Seeds: 1}
	fitRecs, err := m.fitRecords(predictor.ModeTimeslice, &opts)
	if err != nil {
		t.Fatal(err)
	}
	n := len(fitRecs)
	if n < 3 {
		t.Fatalf("%d records, want at least 3", n)
	}
	o := newTSObjective(ctx, fitRecs, opts)
	first := heldOut(func(i int) bool { return i == 0 })

	o.loss(truth, nil)
	if o.simulated != n {
		t.Fatalf("the full fit's point simulated %d records, want %d", o.simulated, n)
	}
	got := o.loss(truth, first)
	if o.simulated != n {
		t.Errorf("the refit at a point the full fit scored simulated %d records more, want none", o.simulated-n)
	}
	if want := newTSObjective(ctx, fitRecs, opts).loss(truth, first); got != want {
		t.Errorf("memoized loss %v, a fresh objective's %v", got, want)
	}
	other := predictor.TimesliceParams{SliceUS: 2000, SwitchUS: 100, HoldoverUS: 500}
	o.loss(other, first)
	o.loss(other, nil)
	if want := n + (n - 1) + 1; o.simulated != want {
		t.Errorf("%d records simulated in all, want %d: each record once a point", o.simulated, want)
	}
	if o.evals != 4 {
		t.Errorf("%d evaluations, want 4: a memoized one counts too", o.evals)
	}
	// Past its cap the memo keeps nothing more: a point is simulated
	// every time it is scored.
	full := newTSObjective(ctx, fitRecs, opts)
	full.memoCap = 0
	full.loss(truth, nil)
	full.loss(truth, first)
	if want := n + n - 1; full.simulated != want || len(full.memo) != 0 {
		t.Errorf("memo capped at 0: %d records simulated, %d points kept; want %d and none", full.simulated, len(full.memo), want)
	}
}
