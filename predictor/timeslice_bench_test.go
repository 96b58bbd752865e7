package predictor

import (
	"fmt"
	"testing"
)

// benchProfiles loads the benchmark scenario's workloads: a 200-op inference
// profile built from the V100 trace's kernels and one V100 training step.
func benchProfiles(b *testing.B) (inf, train *Profile) {
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

// repeatOps returns a copy of p whose ops are p's ops repeated (or cut) to n.
func repeatOps(p *Profile, n int) *Profile {
	q := *p
	q.Ops = make([]Op, n)
	for i := range q.Ops {
		q.Ops[i] = p.Ops[i%len(p.Ops)]
	}
	return &q
}

func benchPredict(b *testing.B, sc *Scenario) {
	var pr Predictor
	params := *DefaultCalibration().Timeslice
	events := 0
	b.ReportAllocs()
	for b.Loop() {
		pred, err := pr.PredictTimeslice(sc, params)
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
// requests and with kernels per inference request and per training iteration.
func BenchmarkPredictTimesliceScaling(b *testing.B) {
	inf, train := benchProfiles(b)
	for _, n := range []int{500, 2000, 8000} {
		b.Run(fmt.Sprintf("requests=%d", n), func(b *testing.B) {
			benchPredict(b, &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.5, Requests: n, Seed: 1})
		})
	}
	for _, k := range []int{50, 200, 800} {
		b.Run(fmt.Sprintf("inference_kernels=%d", k), func(b *testing.B) {
			benchPredict(b, &Scenario{Inference: repeatOps(inf, k), Training: []*Profile{train}, Load: 0.5, Requests: 2000, Seed: 1})
		})
	}
	for _, mult := range []int{1, 4} {
		k := len(train.Ops) * mult
		b.Run(fmt.Sprintf("training_kernels=%d", k), func(b *testing.B) {
			benchPredict(b, &Scenario{Inference: inf, Training: []*Profile{repeatOps(train, k)}, Load: 0.5, Requests: 2000, Seed: 1})
		})
	}
}
