package predictor

import (
	"fmt"
	"testing"
)

// benchProfiles loads the benchmark scenario's workloads: a 200-op inference
// profile built from the V100 trace's kernels and one V100 training step.
func benchProfiles(b testing.TB) (inf, train *Profile) {
	b.Helper()
	inf, err := LoadProfile("../testdata/profiles/v100-infer-200.json")
	if err != nil {
		b.Fatal(err)
	}
	train, err = LoadProfile("../testdata/profiles/v100-train-step.json")
	if err != nil {
		b.Fatal(err)
	}
	return inf, train
}

// splitOps returns a copy of p with every op cut into k equal kernels (the
// gap stays before the first): the same GPU time in k times the kernels.
func splitOps(p *Profile, k int) *Profile {
	q := *p
	q.Ops = make([]Op, 0, k*len(p.Ops))
	for _, op := range p.Ops {
		piece := op
		piece.DurUS = op.DurUS / float64(k)
		for i := range k {
			if i > 0 {
				piece.GapUS = 0
			}
			q.Ops = append(q.Ops, piece)
		}
	}
	return &q
}

// benchPredict predicts sc under time slicing with the default parameters.
func benchPredict(b *testing.B, sc *Scenario) {
	params := *DefaultCalibration().Timeslice
	benchModel(b, func(pr *Predictor) (*Prediction, error) { return pr.PredictTimeslice(sc, params) })
}

// benchModel runs predict in the benchmark loop with one Predictor and
// reports events per second, milliseconds per prediction and events per
// prediction.
func benchModel(b *testing.B, predict func(*Predictor) (*Prediction, error)) {
	var pr Predictor
	events := 0
	b.ReportAllocs()
	for b.Loop() {
		pred, err := predict(&pr)
		if err != nil {
			b.Fatal(err)
		}
		events += pred.Events
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(events)/secs, "events/s")
	b.ReportMetric(secs*1000/float64(b.N), "ms/prediction")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkPredictTimeslice is the scenario: 200-op inference at 50 %
// load, one V100 training step, 2,000 requests. Goals: ≥ 20 M events/s on one
// core, ≤ 10 ms per prediction, allocations independent of the event count.
func BenchmarkPredictTimeslice(b *testing.B) {
	inf, train := benchProfiles(b)
	benchPredict(b, &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.5, Requests: 2000, Seed: 1})
}

// BenchmarkPredictTimesliceScaling shows how the cost grows with the number of
// requests and with kernels per inference request and per training iteration
// (the same GPU time cut into more kernels, so only the kernel count changes).
func BenchmarkPredictTimesliceScaling(b *testing.B) {
	inf, train := benchProfiles(b)
	for _, n := range []int{500, 2000, 8000} {
		b.Run(fmt.Sprintf("requests=%d", n), func(b *testing.B) {
			benchPredict(b, &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.5, Requests: n, Seed: 1})
		})
	}
	for _, k := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("inference_kernels=%d", k*len(inf.Ops)), func(b *testing.B) {
			benchPredict(b, &Scenario{Inference: splitOps(inf, k), Training: []*Profile{train}, Load: 0.5, Requests: 2000, Seed: 1})
		})
	}
	for _, k := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("training_kernels=%d", k*len(train.Ops)), func(b *testing.B) {
			benchPredict(b, &Scenario{Inference: inf, Training: []*Profile{splitOps(train, k)}, Load: 0.5, Requests: 2000, Seed: 1})
		})
	}
}
