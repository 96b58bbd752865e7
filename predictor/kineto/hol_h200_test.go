package kineto

import (
	"encoding/json"

	"testing"

	"github.com/colocd/colocd/internal/testfiles"
	"github.com/colocd/colocd/predictor"
)

// The head-of-line check on a real GPU: BERT-base inference next to two
// trainers of the same utilisation on an H200 under MPS at 100 %, one of
// 1 ms kernels and one of 52 µs kernels whose blocks fill every SM
// (testdata/gpu/h200-hol2: measured service mean 59.8 and 7.95 ms, latency
// p99 943 and 15.3 ms). Imported with waves, the long-kernel trainer must
// come out much worse, and the service time within 25 % of the
// measurement, simulated as the record was served (its rate, requests and
// seed; no contention terms, as the calibration on the 45 other records
// fits them at 0: docs/accuracy.md).
func TestHeadOfLineOnH200(t *testing.T) {
	t.Parallel()
	dir := "testdata/gpu/h200-hol2/"
	var meas struct {
		Records []struct {
			Name     string   `json:"name"`
			Training []string `json:"training"`
			Rate     float64  `json:"rate_rps"`
			Requests int      `json:"requests"`
			Seed     uint64   `json:"seed"`
			Measured struct {
				Service struct{ Mean float64 } `json:"service_ms"`
				Latency struct{ P99 float64 }  `json:"latency_ms"`
			} `json:"measured"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(testfiles.Read(t, dir+"measurements.json")), &meas); err != nil {
		t.Fatal(err)
	}
	load := func(name string, kind predictor.Kind, annotation string) *predictor.Profile {
		p, err := ImportFile(testfiles.Path(t, dir+"traces/"+name+".json.gz"), Options{Kind: kind, Annotation: annotation, Waves: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	inf := load("bert-infer", predictor.KindInference, "request")
	trainers := map[string]*predictor.Profile{
		"profiles/spin-long-train.json":  load("spin-long-train", predictor.KindTraining, ""),
		"profiles/spin-short-train.json": load("spin-short-train", predictor.KindTraining, ""),
	}
	var pr predictor.Predictor
	p99 := map[string]float64{}
	for _, r := range meas.Records {
		tr := trainers[r.Training[0]]
		if tr == nil {
			t.Fatalf("%s: unexpected trainer %s", r.Name, r.Training[0])
		}
		sc := &predictor.Scenario{Inference: inf, Training: []*predictor.Profile{tr}, TrainingPct: []float64{100},
			RateRPS: r.Rate, Requests: r.Requests, Seed: r.Seed}
		p, err := pr.PredictMPS(sc, predictor.MPSParams{})
		if err != nil {
			t.Fatal(err)
		}
		svc, want := p.Inference.ServiceMS.Mean, r.Measured.Service.Mean
		t.Logf("%s: service mean %.2f ms (measured %.2f), latency p99 %.1f ms (measured %.1f)",
			r.Name, svc, want, p.Inference.LatencyMS.P99, r.Measured.Latency.P99)
		if d := svc/want - 1; d > 0.25 || d < -0.25 {
			t.Errorf("%s: service mean %.2f ms, measured %.2f ms: %+.0f %%, want within 25 %%", r.Name, svc, want, 100*d)
		}
		p99[tr.Name] = p.Inference.LatencyMS.P99
	}
	if long, short := p99["spin-long-train"], p99["spin-short-train"]; !(long > 10*short) {
		t.Errorf("p99 %.1f ms next to 1 ms kernels, %.1f ms next to 52 µs ones: want the long kernels far worse (measured 943 vs 15.3 ms)", long, short)
	}
}
