package predictor_test

import (
	"testing"

	"github.com/colocd/colocd/predictor"
)

// Trainers that differ only in how busy they keep the GPU predict
// differently, in both modes: idle time comes in long gaps the inference
// service can use, not in slivers shorter than the hold-over.
func TestSummaryUtilisationMatters(t *testing.T) {
	t.Parallel()
	infer, err := predictor.LoadProfile("../testdata/profiles/v100-infer-200.json")
	if err != nil {
		t.Fatal(err)
	}
	cal := predictor.DefaultCalibration()
	var pr predictor.Predictor
	for _, mode := range []predictor.Mode{predictor.ModeTimeslice, predictor.ModeMPS} {
		var p99 []float64
		for _, util := range []float64{0.5, 0.99} {
			tr := &predictor.Profile{Format: predictor.ProfileFormat, Name: "tr", Kind: predictor.KindTraining,
				Summary: &predictor.Summary{IterationMS: 100, GPUUtil: util, MemUtil: util / 3}}
			sc := &predictor.Scenario{Inference: infer, Training: []*predictor.Profile{tr}, Load: 0.3, Requests: 2000, Seed: 1}
			if mode == predictor.ModeMPS {
				sc.TrainingPct = []float64{100}
			}
			pred, err := pr.Predict(sc, mode, cal)
			if err != nil {
				t.Fatal(err)
			}
			p99 = append(p99, pred.Inference.LatencyMS.P99)
		}
		t.Logf("%s: p99 %.1f ms next to a trainer at 50 %%, %.1f ms at 99 %%", mode, p99[0], p99[1])
		if !(p99[0] < 0.9*p99[1]) {
			t.Errorf("%s: p99 %.2f ms next to a trainer at 50 %% utilisation, %.2f ms at 99 %%: want the first at least 10 %% lower", mode, p99[0], p99[1])
		}
	}
}
