package kineto

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/internal/testfiles"
	"github.com/colocd/colocd/predictor"
)

// The head-of-line check on a real GPU: BERT-base inference next to two
// trainers of the same utilisation on an H200 under MPS at 100 %, one of
// 1 ms kernels and one of 52 µs kernels whose blocks fill every SM
// (testdata/gpu/h200-hol2: measured service mean 59.8 and 7.95 ms, latency
// p99 943 and 15.3 ms). Imported with waves (and each unit as timed without
// the profiler), the long-kernel trainer must
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
	// Each unit as timed without the profiler (--unit-ms, as the harness imports).
	var run struct {
		Solo map[string]struct {
			BackToBack struct{ Mean float64 } `json:"service_backtoback_ms"`
			Iteration  struct{ Mean float64 } `json:"iteration_ms"`
		} `json:"solo"`
	}
	if err := json.Unmarshal([]byte(testfiles.Read(t, dir+"run.json")), &run); err != nil {
		t.Fatal(err)
	}
	load := func(name string, kind predictor.Kind, annotation string) *predictor.Profile {
		unit := run.Solo[name].BackToBack.Mean + run.Solo[name].Iteration.Mean
		p, err := ImportFile(testfiles.Path(t, dir+"traces/"+name+".json.gz"), Options{Kind: kind, Annotation: annotation, Waves: true, UnitMS: unit})
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

// A training step traced on the H200 runs 42.05 ms under the profiler and
// 30.45 ms without it (testdata/gpu/h200/run.json, solo iteration mean):
// --unit-ms shrinks the host gaps to match and keeps every kernel as traced;
// a length shorter than the kernels is refused by field.
func TestUnitMSOnH200(t *testing.T) {
	t.Parallel()
	path := testfiles.Path(t, "testdata/gpu/h200/traces/bert-train.json.gz")
	traced, err := ImportFile(path, Options{Kind: predictor.KindTraining})
	if err != nil {
		t.Fatal(err)
	}
	fitted, err := ImportFile(path, Options{Kind: predictor.KindTraining, UnitMS: 30.4498})
	if err != nil {
		t.Fatal(err)
	}
	unit := func(p *predictor.Profile) (unit, busy float64) {
		for _, op := range p.Ops {
			unit += op.DurUS + op.GapUS
			busy += op.DurUS
		}
		return unit / 1000, busy / 1000
	}
	tu, tb := unit(traced)
	fu, fb := unit(fitted)
	t.Logf("traced unit %.2f ms (kernels %.2f ms), fitted %.2f ms (kernels %.2f ms)", tu, tb, fu, fb)
	if math.Abs(fu-30.4498) > 0.01 || fb != tb || len(fitted.Ops) != len(traced.Ops) {
		t.Errorf("fitted unit %.3f ms with kernels %.3f ms (%d ops); want 30.450 ms with the traced %.3f ms (%d ops)", fu, fb, len(fitted.Ops), tb, len(traced.Ops))
	}
	if n := fitted.Notes[len(fitted.Notes)-1]; !strings.Contains(n, "--unit-ms") {
		t.Errorf("last note %q: want it to say the gaps were scaled", n)
	}
	for _, ms := range []float64{20, -1, math.NaN()} {
		_, err := ImportFile(path, Options{Kind: predictor.KindTraining, UnitMS: ms})
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Path != "unit_ms" {
			t.Errorf("unit %v ms: %v, want a unit_ms error", ms, err)
		}
	}
}
