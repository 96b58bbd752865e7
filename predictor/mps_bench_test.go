package predictor

import (
	"testing"
)

// mpsBenchParams are the H200 preset's placeholder coefficients.
var mpsBenchParams = MPSParams{DRAM: 0.5, L2: 0.25, Kernels: 0.1}

// BenchmarkPredictMPS is the time-slicing benchmark's scenario under MPS with
// the trainer at 50 %: goal ≤ 10 ms per prediction on one core.
func BenchmarkPredictMPS(b *testing.B) {
	inf, train := benchProfiles(b)
	sc := &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.5, Requests: 2000, Seed: 1, TrainingPct: []float64{50}}
	benchModel(b, func(pr *Predictor) (*Prediction, error) { return pr.PredictMPS(sc, mpsBenchParams) })
}

// BenchmarkPredictMPSWaves is BenchmarkPredictMPS on profiles that carry
// waves, so that every kernel the service starts next to the trainer's is
// charged a head-of-line wait: ResNet-50 inference and training as
// `colocd profile import` wrote them from H200 traces, the trainer at 50 %.
func BenchmarkPredictMPSWaves(b *testing.B) {
	var ps [2]*Profile
	for i, name := range []string{"resnet50-infer", "resnet50-train"} {
		p, err := LoadProfile("../testdata/gpu/h200/profiles/" + name + ".json")
		if err != nil {
			b.Fatal(err)
		}
		ps[i] = p
	}
	sc := &Scenario{Inference: ps[0], Training: []*Profile{ps[1]}, Load: 0.5, Requests: 2000, Seed: 1, TrainingPct: []float64{50}}
	benchModel(b, func(pr *Predictor) (*Prediction, error) { return pr.PredictMPS(sc, mpsBenchParams) })
}

// BenchmarkMPSSweep predicts every training percentage the admission search
// can pick with a 5 % step, 10 % to 100 % (19 predictions): the most an
// admission decision pays for one service; the binary search pays about 5.
func BenchmarkMPSSweep(b *testing.B) {
	inf, train := benchProfiles(b)
	var pr Predictor
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for pct := 10.0; pct <= 100; pct += 5 {
			sc := &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.5, Requests: 2000, Seed: 1, TrainingPct: []float64{pct}}
			if _, err := pr.PredictMPS(sc, mpsBenchParams); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(secs*1000/float64(b.N), "ms/sweep")
	b.ReportMetric(float64(n)/float64(b.N), "predictions/sweep")
}
