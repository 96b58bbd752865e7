package predictor

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
)

func weight(w float64) *float64 { return &w }

// blendScenario is a service next to a trainer that never idles, small
// enough to predict in a few milliseconds.
func blendScenario() *Scenario {
	return &Scenario{
		Inference: uniformProfile("inf", KindInference, 4, 250, 20),
		Training:  []*Profile{uniformProfile("tr", KindTraining, 6, 900, 5)},
		RateRPS:   300, Requests: 400, Seed: 3,
	}
}

// TestBlendApply: at weight w every figure with a naive ratio is w × the
// simulator's + (1 − w) × ratio × its solo value, the interval's ends blend
// with the same naive value, a trainer's slowdown follows its iteration,
// and a figure without a ratio keeps the simulator's value.
func TestBlendApply(t *testing.T) {
	t.Parallel()
	var pr Predictor
	sim, err := pr.Predict(blendScenario(), ModeTimeslice, DefaultCalibration())
	if err != nil {
		t.Fatal(err)
	}
	if sim.Blend != nil {
		t.Fatalf("a calibration without a blend reported weight %v", *sim.Blend)
	}
	cal := DefaultCalibration()
	cal.Blend = &Blend{Weight: weight(0.25), NaiveRatio: map[string]float64{"latency_ms.p99": 2, "service_ms.mean": 1.5, IterationFigure: 1.2}}
	got, err := pr.Predict(blendScenario(), ModeTimeslice, cal)
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	s, b := sim.Inference, got.Inference
	n := 2 * s.SoloLatencyMS.P99
	near("latency p99", b.LatencyMS.P99, 0.25*s.LatencyMS.P99+0.75*n)
	near("latency p99 interval low", b.LatencyInterval.P99[0], 0.25*s.LatencyInterval.P99[0]+0.75*n)
	near("latency p99 interval high", b.LatencyInterval.P99[1], 0.25*s.LatencyInterval.P99[1]+0.75*n)
	near("service mean", b.ServiceMS.Mean, 0.25*s.ServiceMS.Mean+0.75*1.5*s.SoloServiceMS.Mean)
	if b.LatencyMS.Mean != s.LatencyMS.Mean || b.LatencyInterval.Mean != s.LatencyInterval.Mean {
		t.Errorf("latency mean %v %v, want the simulator's %v %v (no ratio for it)", b.LatencyMS.Mean, b.LatencyInterval.Mean, s.LatencyMS.Mean, s.LatencyInterval.Mean)
	}
	if got.Services[0].LatencyMS != b.LatencyMS {
		t.Error("Services[0] and Inference differ")
	}
	st, bt := sim.Training[0], got.Training[0]
	wantIt := 0.25**st.IterationMS + 0.75*1.2**st.SoloIterationMS
	near("iteration", *bt.IterationMS, wantIt)
	near("slowdown", bt.Slowdown, wantIt / *st.SoloIterationMS)
	near("throughput", bt.Throughput, *st.SoloIterationMS/wantIt)
	near("iterations per s", *bt.IterationsPerS, 1000/wantIt)
	if got.Blend == nil || *got.Blend != 0.25 {
		t.Errorf("blend_weight %v, want 0.25", got.Blend)
	}
	var text strings.Builder
	if err := got.WriteText(&text, cal); err != nil || !strings.Contains(text.String(), "blend: 0.25 × the simulator + 0.75 × the naive slowdown") {
		t.Errorf("text (err %v) does not say the blend:\n%s", err, text.String())
	}
	// Weight 1 is the simulator, to the bit.
	cal.Blend.Weight = weight(1)
	one, err := pr.Predict(blendScenario(), ModeTimeslice, cal)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, sim) {
		t.Error("weight 1 changed the prediction")
	}
}

// TestBlendMPS: an MPS calibration's blend moves MPS predictions, and
// weight 0 is the naive slowdown alone.
func TestBlendMPS(t *testing.T) {
	t.Parallel()
	var pr Predictor
	sc := blendScenario()
	sc.TrainingPct = []float64{50}
	cal := DefaultCalibration()
	cal.MPS = &MPSCalibration{Coefficients: map[string]float64{"dram": 0.2}, Blend: &Blend{Weight: weight(0), NaiveRatio: map[string]float64{"latency_ms.p99": 1.7}}}
	got, err := pr.Predict(sc, ModeMPS, cal)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1.7 * got.Inference.SoloLatencyMS.P99; math.Abs(got.Inference.LatencyMS.P99-want) > 1e-9 {
		t.Errorf("p99 %v, want the naive %v", got.Inference.LatencyMS.P99, want)
	}
	// The time-slicing prediction does not read the MPS blend.
	ts, err := pr.Predict(blendScenario(), ModeTimeslice, cal)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Blend != nil {
		t.Error("the mps blend moved a time-slicing prediction")
	}
}

// TestBlendedFit: the model's own error of a blended calibration is the
// blend's misses, in-sample and held out.
func TestBlendedFit(t *testing.T) {
	t.Parallel()
	v := func(x float64) *float64 { return &x }
	fit := fitOf(
		MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 20, CVPredicted: v(30), Naive: v(10), CVNaive: v(10)},
		MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 20, CVPredicted: v(30)}, // no naive: the simulator's
	)
	b := &Blend{Weight: weight(0.5), NaiveRatio: map[string]float64{"latency_ms.p99": 1}}
	got := b.BlendedFit(fit).PerRecord[0].Metrics
	if got[0].Predicted != 15 || *got[0].CVPredicted != 20 {
		t.Errorf("blended %v / %v, want 15 / 20", got[0].Predicted, *got[0].CVPredicted)
	}
	if got[1].Predicted != 20 || *got[1].CVPredicted != 30 {
		t.Errorf("without naive values %v / %v, want the simulator's 20 / 30", got[1].Predicted, *got[1].CVPredicted)
	}
	if *fit.PerRecord[0].Metrics[0].CVPredicted != 30 {
		t.Error("BlendedFit changed the calibration's own report")
	}
	var none *Blend
	if none.BlendedFit(fit) != fit {
		t.Error("no blend: want the fit itself")
	}
}

// TestBlendRoundTrip: a calibration's blends survive a save and a load, an
// old file without them means the simulator alone, and a merged file's
// blend goes with the section it came with.
func TestBlendRoundTrip(t *testing.T) {
	t.Parallel()
	cal := DefaultCalibration()
	cal.Blend = &Blend{Weight: weight(0.5), NaiveRatio: map[string]float64{"latency_ms.p99": 1.9, IterationFigure: 1.1}, CV: "leave-one-workload-out",
		CVMAPE: &BlendCV{Simulator: 0.25, Naive: 0.17, Blend: 0.15, Metrics: 198}, Grid: []BlendPoint{{0, 0.17}, {0.5, 0.14}, {1, 0.25}}, FoldWeights: []float64{0.5, 0.25, 0.5}}
	cal.MPS = &MPSCalibration{Coefficients: map[string]float64{"dram": 0, "l2": 0, "kernels": 0}, Blend: &Blend{Weight: weight(1), NaiveRatio: map[string]float64{"service_ms.mean": 1.3}}}
	data, err := json.Marshal(cal)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCalibration(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, cal) {
		t.Errorf("round trip changed the calibration:\n got %+v\nwant %+v", back, cal)
	}
	old, err := ParseCalibration([]byte(`{"format":"colocd.calibration/v1","timeslice":{"slice_us":900,"switch_us":50,"holdover_us":300},"mps":{"coefficients":{"dram":0.1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if w, m := old.Blend.SimulatorWeight(), old.MPS.Blend.SimulatorWeight(); w != 1 || m != 1 {
		t.Errorf("a file without blends has weights %v and %v, want 1 (the simulator alone)", w, m)
	}
	// Over a base with blends: a file's timeslice section brings its own
	// blend (none), its mps section too; what it leaves keeps the base's.
	if m := cal.Merge(old); m.Blend != nil || m.MPS.Blend != nil {
		t.Errorf("merged blends %+v %+v, want none: they go with the sections the file brings", m.Blend, m.MPS.Blend)
	}
	mpsOnly := &Calibration{Format: CalibrationFormat, MPS: &MPSCalibration{Coefficients: map[string]float64{"dram": 0.3}}}
	if m := cal.Merge(mpsOnly); m.Blend != cal.Blend || m.MPS.Blend != nil {
		t.Errorf("merged blends %+v %+v, want the base's time-slicing blend and no mps blend", m.Blend, m.MPS.Blend)
	}
}

func TestBlendValidate(t *testing.T) {
	t.Parallel()
	const ts = `"timeslice":{"slice_us":900,"switch_us":50,"holdover_us":300}`
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"weight above 1", `{"format":"colocd.calibration/v1",` + ts + `,"blend":{"weight":1.5,"naive_ratio":{"latency_ms.p99":2}}}`,
			[]string{"blend.weight: want the simulator's weight in [0, 1], got 1.5"}},
		{"no weight", `{"format":"colocd.calibration/v1",` + ts + `,"blend":{"naive_ratio":{"latency_ms.p99":2}}}`,
			[]string{"blend.weight: want the simulator's weight in [0, 1], got nothing"}},
		{"unknown figure", `{"format":"colocd.calibration/v1",` + ts + `,"blend":{"weight":0.5,"naive_ratio":{"latency_ms.p42":2}}}`,
			[]string{`blend.naive_ratio.latency_ms.p42: want a figure: latency_ms.mean, latency_ms.p50`, `got "latency_ms.p42"`}},
		{"ratio not positive", `{"format":"colocd.calibration/v1",` + ts + `,"blend":{"weight":0.5,"naive_ratio":{"latency_ms.p99":0,"training_iteration_ms":2000}}}`,
			[]string{"blend.naive_ratio.latency_ms.p99: want a ratio of measured to solo in (0, 1000], got 0", "blend.naive_ratio.training_iteration_ms: want a ratio of measured to solo in (0, 1000], got 2000"}},
		{"naive weight without ratios", `{"format":"colocd.calibration/v1",` + ts + `,"blend":{"weight":0}}`,
			[]string{"blend.naive_ratio: want a ratio for at least one figure when weight < 1, got none"}},
		{"blend without its section", `{"format":"colocd.calibration/v1","mps":{"coefficients":{}},"blend":{"weight":1}}`,
			[]string{"blend: want a blend only beside a timeslice section, got a blend and no timeslice"}},
		{"mps blend", `{"format":"colocd.calibration/v1","mps":{"coefficients":{},"blend":{"weight":-0.5,"fold_weights":[2]}}}`,
			[]string{"mps.blend.weight: want the simulator's weight in [0, 1], got -0.5", "mps.blend.fold_weights[0]: want a weight in [0, 1], got 2"}},
		{"unknown key", `{"format":"colocd.calibration/v1",` + ts + `,"blend":{"weight":1,"ratio":{}}}`,
			[]string{"ratio"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseCalibration([]byte(tt.doc))
			fieldtest.WantText(t, err, tt.want...)
		})
	}
}
