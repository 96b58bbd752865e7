//go:build !race

// TestSummaryMatchesTrace imports three real traces and predicts each
// twice per mode and load: numeric and single-threaded, many times slower
// under the race detector. go test -race leaves this file out; a run
// without -race includes it.

package predictor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/predictor/kineto"
)

// summaryOf is the summary-only profile a user who measured p would write.
func summaryOf(p *predictor.Profile) *predictor.Profile {
	s := p.Summarize()
	return &predictor.Profile{Format: predictor.ProfileFormat, Name: p.Name + "-summary", Kind: p.Kind, Device: p.Device, Summary: &s}
}

func importTrace(t *testing.T, name string, opts kineto.Options) *predictor.Profile {
	t.Helper()
	p, err := kineto.ImportFile("../testdata/kineto/"+name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// For each real trace, a summary made from it (utilisation, iteration or
// request time, memory and SM utilisation, the share of busy time in
// GPU-filling kernels, their block time) predicts the inference p99
// within 10 % of the full kernel profile's, under time slicing and with
// the trainer at 100, 50 and 25 % under MPS, at loads 0.2 and 0.5, for
// profiles imported without and with waves. A queue that never drains (a
// p99 over 5 s) is not compared
// (docs/profiles.md#summary-only-profiles has the table).
func TestSummaryMatchesTrace(t *testing.T) {
	t.Parallel()
	infer, err := predictor.LoadProfile("../testdata/profiles/v100-infer-200.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, waves := range []bool{false, true} {
		t.Run(fmt.Sprintf("waves=%v", waves), func(t *testing.T) {
			t.Parallel()
			summaryMatchesTrace(t, infer, waves)
		})
	}
}

// summaryMatchesTrace runs TestSummaryMatchesTrace's cases on traces
// imported with or without waves (colocd profile import writes them by
// default; the summary then carries block_us).
func summaryMatchesTrace(t *testing.T, infer *predictor.Profile, waves bool) {
	v100 := importTrace(t, "v100-training-5steps.json.gz", kineto.Options{Waves: waves})
	multi := importTrace(t, "multistream-training-2steps.json.gz", kineto.Options{Waves: waves})
	// The A100 benchmark has no profiler steps: its first kernel is the
	// input's initialisation, 15.6 s before two forward passes. One
	// request is the first pass (ops 1–39).
	a100 := importTrace(t, "a100-small-benchmark.json.gz", kineto.Options{Kind: predictor.KindInference, Waves: waves})
	reqA := *a100
	reqA.Name = "a100-request"
	reqA.Ops = append([]predictor.Op(nil), a100.Ops[1:40]...)
	reqA.Ops[0].GapUS = 0
	cases := []struct {
		trace         string
		service, full *predictor.Profile // full: the profile the summary replaces
		trainer       *predictor.Profile
	}{
		{"v100-training-5steps (trainer)", infer, v100, v100},
		{"multistream-training-2steps (trainer)", infer, multi, multi},
		{"a100-small-benchmark, first pass (service)", &reqA, &reqA, v100},
	}
	cal := predictor.DefaultCalibration()
	cal = cal.Merge(&predictor.Calibration{MPS: &predictor.MPSCalibration{Coefficients: map[string]float64{"dram": 0.5, "l2": 0.25, "kernels": 0.1}}})
	var pr predictor.Predictor
	p99 := func(svc, tr *predictor.Profile, mode predictor.Mode, pct, load float64) float64 {
		sc := &predictor.Scenario{Inference: svc, Training: []*predictor.Profile{tr}, Load: load, Requests: 2000, Seed: 1}
		if mode == predictor.ModeMPS {
			sc.TrainingPct = []float64{pct}
		}
		pred, err := pr.Predict(sc, mode, cal)
		if err != nil {
			t.Fatal(err)
		}
		return pred.Inference.LatencyMS.P99
	}
	settings := []struct {
		mode predictor.Mode
		pct  float64 // the trainer's MPS percentage
	}{{predictor.ModeTimeslice, 0}, {predictor.ModeMPS, 100}, {predictor.ModeMPS, 50}, {predictor.ModeMPS, 25}}
	t.Logf("| trace | summary | mode | load | p99 full (ms) | p99 summary (ms) | error |")
	for _, c := range cases {
		sum := summaryOf(c.full)
		s := sum.Summary
		desc := fmt.Sprintf("util %.3f, mem %.3f, unit %.1f ms, block %.1f µs", s.GPUUtil, s.MemUtil, max(s.LatencyMS, s.IterationMS), s.BlockUS)
		for _, set := range settings {
			mode := set.mode
			if mode == predictor.ModeMPS {
				mode = predictor.Mode(fmt.Sprintf("mps %g %%", set.pct))
			}
			for _, load := range []float64{0.2, 0.5} {
				svc, tr := c.service, c.trainer
				ssvc, str := svc, tr
				if c.full == c.service {
					ssvc = sum
				} else {
					str = sum
				}
				full, got := p99(svc, tr, set.mode, set.pct, load), p99(ssvc, str, set.mode, set.pct, load)
				e := (got - full) / full
				t.Logf("| %s | %s | %s | %.1f | %.2f | %.2f | %+.1f %% |", c.trace, desc, mode, load, full, got, 100*e)
				if full > 5000 {
					continue // a queue that never drains: its p99 is the run's length
				}
				if math.Abs(e) > 0.10 {
					t.Errorf("%s, %s, load %.1f: summary p99 %.2f ms, full profile %.2f ms: %+.1f %%, want within 10 %%", c.trace, mode, load, got, full, 100*e)
				}
			}
		}
	}
}
