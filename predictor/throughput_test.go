package predictor

import (
	"math"
	"testing"
)

// A trainer's throughput is the share of its solo speed it keeps, and its
// iterations per second follow from its co-located iteration; a stream
// trainer (no iteration) has the share only. More of the GPU, more of it.
func TestTrainerThroughput(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 10, 200, 20)
	tr := uniformProfile("tr", KindTraining, 30, 300, 10)
	stream := &Profile{Format: ProfileFormat, Name: "stream", Kind: KindTraining, Summary: &Summary{GPUUtil: 0.9}}
	last := 0.0
	for _, pct := range []float64{20, 50, 100} {
		sc := &Scenario{Inference: inf, Training: []*Profile{tr, stream}, TrainingPct: []float64{pct, 50}, Load: 0.5, Requests: 500, Seed: 1}
		var pr Predictor
		pred, err := pr.PredictMPS(sc, MPSParams{})
		if err != nil {
			t.Fatal(err)
		}
		a, s := pred.Training[0], pred.Training[1]
		if math.Abs(a.Throughput*a.Slowdown-1) > 1e-12 || a.IterationsPerS == nil || math.Abs(*a.IterationsPerS**a.IterationMS-1000) > 1e-9 {
			t.Errorf("%g %%: throughput %g, slowdown %g, %v it/s, iteration %v ms", pct, a.Throughput, a.Slowdown, a.IterationsPerS, a.IterationMS)
		}
		if s.IterationsPerS != nil || !(s.Throughput > 0 && s.Throughput <= 1) {
			t.Errorf("stream trainer: %v it/s, throughput %g; want none and a share", s.IterationsPerS, s.Throughput)
		}
		if !(a.Throughput > last) {
			t.Errorf("throughput %g at %g %%, %g lower: want it to grow", a.Throughput, pct, last)
		}
		last = a.Throughput
	}
}
