package predictor

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// The batch-means intervals take Student's t at 19 degrees of freedom:
// 2.093 two-sided at 95 % (the tables' figure), whether precomputed for
// the default confidence or computed for another.
func TestTQuantile(t *testing.T) {
	for _, c := range []struct{ got, want float64 }{
		{tDefault, 2.0930},
		{tQuantile(DefaultConfidence, Batches-1), 2.0930},
		{tQuantile(0.99, Batches-1), 2.8609},
	} {
		if math.Abs(c.got-c.want) > 5e-4 {
			t.Errorf("t quantile %.4f, want %.4f", c.got, c.want)
		}
	}
}

// gappyProfile is uniformProfile with durations and gaps drawn from ±50 %.
func gappyProfile(name string, kind Kind, n int, dur, gap float64, seed uint64) *Profile {
	p := uniformProfile(name, kind, n, dur, gap)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range p.Ops {
		p.Ops[i].DurUS *= 0.5 + rng.Float64()
		p.Ops[i].GapUS *= 0.5 + rng.Float64()
	}
	return p
}

// gappyPair is the service and the trainer the interval tests simulate:
// six ~200 µs kernels a request, thirty ~400 µs kernels an iteration.
func gappyPair() (inf, tr *Profile) {
	return gappyProfile("inf", KindInference, 6, 200, 20, 1), gappyProfile("tr", KindTraining, 30, 400, 100, 2)
}

// gappyTS is the time slicing the tests of gappy profiles simulate.
var gappyTS = TimesliceParams{SliceUS: 1024, SwitchUS: 60, HoldoverUS: 300}

// A calibration that says how well its parameters are pinned widens the
// intervals Predict reports, and says so; the point estimate stays what
// PredictTimeslice gives. Without parameter reports nothing changes.
func TestPredictWidensByParameters(t *testing.T) {
	t.Parallel()
	inf, tr := gappyPair()
	ts := gappyTS
	sc := &Scenario{Inference: inf, Training: []*Profile{tr}, Load: 0.3, Requests: 2000, Seed: 1}
	var pr Predictor
	plain, err := pr.PredictTimeslice(sc, ts)
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	for _, tt := range []struct {
		name   string
		params []ParameterFit
		wider  bool
	}{
		{"no parameter reports", nil, false},
		{"pinned ±20 %", []ParameterFit{
			{Name: "slice_us", Value: 1024, Low: f(820), High: f(1230), PinnedBy: PinnedByRecords},
			{Name: "switch_us", Value: 60, Low: f(48), High: f(72), PinnedBy: PinnedByRecords},
			{Name: "holdover_us", Value: 300, Low: f(240), High: f(360), PinnedBy: PinnedByRecords},
		}, true},
		{"switch open above", []ParameterFit{{Name: "switch_us", Value: 60, Low: f(30), PinnedBy: PinnedByNone}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cal := &Calibration{Format: CalibrationFormat, Timeslice: &ts}
			if tt.params != nil {
				cal.Fit = &FitReport{Parameters: tt.params}
			}
			got, err := pr.Predict(sc, ModeTimeslice, cal)
			if err != nil {
				t.Fatal(err)
			}
			if got.Inference.LatencyMS != plain.Inference.LatencyMS {
				t.Errorf("point %+v, want PredictTimeslice's %+v", got.Inference.LatencyMS, plain.Inference.LatencyMS)
			}
			g, p := got.Inference.LatencyInterval.P99, plain.Inference.LatencyInterval.P99
			if got.Inference.ParameterUncertainty != tt.wider {
				t.Errorf("parameter_uncertainty %v, want %v", got.Inference.ParameterUncertainty, tt.wider)
			}
			if tt.wider && !(g[0] <= p[0] && g[1] > p[1]) {
				t.Errorf("p99 interval %v, want wider than the sampling error's %v", g, p)
			}
			if !tt.wider && g != p {
				t.Errorf("p99 interval %v, want the sampling error's %v", g, p)
			}
		})
	}
}

// The same for MPS: the calibration's coefficient intervals widen the
// intervals Predict reports under MPS.
func TestPredictWidensByMPSParameters(t *testing.T) {
	t.Parallel()
	inf, tr := gappyPair()
	for i := range tr.Ops {
		d, l := 0.6, 0.4
		tr.Ops[i].DRAM, tr.Ops[i].L2 = &d, &l
		d2, l2 := 0.5, 0.3
		if i < len(inf.Ops) {
			inf.Ops[i].DRAM, inf.Ops[i].L2 = &d2, &l2
		}
	}
	sc := &Scenario{Inference: inf, Training: []*Profile{tr}, TrainingPct: []float64{60}, Load: 0.3, Requests: 2000, Seed: 1}
	params := MPSParams{DRAM: 0.5, L2: 0.25, Kernels: 0.1}
	f := func(v float64) *float64 { return &v }
	cal := &Calibration{Format: CalibrationFormat, MPS: &MPSCalibration{Coefficients: map[string]float64{"dram": 0.5, "l2": 0.25, "kernels": 0.1},
		Fit: &FitReport{Parameters: []ParameterFit{{Name: "dram", Value: 0.5, Low: f(0.3), High: f(0.7)}, {Name: "l2", Value: 0.25, Low: f(0.1), High: f(0.4)}}}}}
	var pr Predictor
	plain, err := pr.PredictMPS(sc, params)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pr.Predict(sc, ModeMPS, cal)
	if err != nil {
		t.Fatal(err)
	}
	g, p := got.Inference.LatencyInterval.P99, plain.Inference.LatencyInterval.P99
	if got.Inference.LatencyMS != plain.Inference.LatencyMS || !got.Inference.ParameterUncertainty || !(g[0] <= p[0] && g[1] > p[1]) {
		t.Errorf("p99 %v in %v (parameter uncertainty %v), want %v in an interval wider than %v", got.Inference.LatencyMS.P99, g,
			got.Inference.ParameterUncertainty, plain.Inference.LatencyMS.P99, p)
	}
}

// A parameter the records left open at both ends is predicted at both
// ends of the searched range, an eighth and eight times its value.
func TestWidenOpenBothWays(t *testing.T) {
	t.Parallel()
	var at []float64
	pred := &Prediction{Services: []InferencePrediction{{}}}
	var pr Predictor
	err := pr.widen(pred, []ParameterFit{{Name: "slice_us", Value: 1000}}, true, func(_ string, v float64) (*Prediction, error) {
		at = append(at, v)
		return nil, nil
	})
	if err != nil || len(at) != 2 || at[0] != 125 || at[1] != 8000 {
		t.Errorf("evaluated at %v (%v), want [125 8000]", at, err)
	}
}

// Services whose rates are far apart would need the fast one's arrivals
// over the slow one's horizon: refused before any is drawn.
func TestArrivalsBounded(t *testing.T) {
	t.Parallel()
	if _, err := arrivalsFor(nil, []float64{0.001, 1e6}, nil, 2000, 1); !errors.Is(err, ErrTooManyEvents) {
		t.Errorf("err = %v, want ErrTooManyEvents", err)
	}
	a := gappyProfile("a", KindInference, 6, 200, 20, 1)
	var pr Predictor
	_, err := pr.PredictTimeslice(&Scenario{Inference: a, RateRPS: 0.001, Others: []OtherService{{Profile: a, RateRPS: 1e6}}},
		gappyTS)
	if !errors.Is(err, ErrTooManyEvents) {
		t.Errorf("predict: err = %v, want ErrTooManyEvents", err)
	}
	if got, err := arrivalsFor(nil, []float64{1, 1000}, nil, 200, 1); err != nil || len(got[0]) != 200 || len(got[1]) < 200 {
		t.Errorf("1 and 1000 req/s: %v, want 200 and more arrivals", err)
	}
}
