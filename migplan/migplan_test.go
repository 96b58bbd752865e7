package migplan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/jsontest"
	"github.com/colocd/colocd/predictor"
)

const profilesDir = "../testdata/profiles"

// The scripted plans: an inference service whose kernels fill about a third
// of an H200 (sm_util/gpu_util = 0.35) under a tight SLO, where a 3g
// instance loses it nothing and MPS must throttle the trainer to 15 %; and
// BERT-like kernels that fill the GPU, where MPS keeps the trainer at 100 %
// and beats every layout.
func TestMake(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, inference          string
		rate, slo                float64
		best, first, infOn, trOn string
		mpsPct                   int
	}{
		{"small kernels, tight SLO", "testdata/small-kernel-infer.json", 50, 20, "mig", "4g.71gb+3g.71gb", "3g.71gb", "4g.71gb", 15},
		{"kernels that fill the GPU", profilesDir + "/summary-bert.json", 20, 40, "mps", "4g.71gb+3g.71gb", "3g.71gb", "4g.71gb", 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := makePlan(t, tt.inference, tt.rate, tt.slo, predictor.DefaultRequests)
			if plan.Best != tt.best || len(plan.Layouts) != 38 {
				t.Fatalf("best %q over %d layouts, want %q over 38", plan.Best, len(plan.Layouts), tt.best)
			}
			if l := plan.Layouts[0]; l.Layout != tt.first || l.Inference != tt.infOn || l.Training != tt.trOn || !l.SLOHolds || len(l.Spare) != 0 {
				t.Errorf("first %+v, want %s with the service on %s and the trainer on %s", l, tt.first, tt.infOn, tt.trOn)
			}
			byProfile := map[string]Instance{}
			for _, p := range plan.Instances {
				byProfile[p.Profile] = p
			}
			for i, l := range plan.Layouts {
				if l.Rank != i+1 {
					t.Errorf("row %d has rank %d", i, l.Rank)
				}
				if p := byProfile[l.Inference]; l.Inference != "" && (l.P99MS != p.P99MS || l.SLOHolds != (p.P99MS <= plan.LimitMS)) {
					t.Errorf("%s: p99 %v (holds %v), the instance's %v against %v", l.Layout, l.P99MS, l.SLOHolds, p.P99MS, plan.LimitMS)
				}
				if l.Training != "" && l.Throughput != byProfile[l.Training].Throughput {
					t.Errorf("%s: throughput %v, the instance's %v", l.Layout, l.Throughput, byProfile[l.Training].Throughput)
				}
				if i > 0 {
					prev := plan.Layouts[i-1]
					if !prev.SLOHolds && l.SLOHolds || prev.SLOHolds && l.SLOHolds && prev.Throughput < l.Throughput {
						t.Errorf("rank %d (%+v) above rank %d (%+v)", i, prev, i+1, l)
					}
				}
				if l.Layout == "7g.141gb" && (l.Training != "" || len(l.Spare) != 0) {
					t.Errorf("7g: %+v, want no instance for the trainer", l)
				}
			}
			// The trainer's 20 GiB do not fit a 1g.18gb.
			if p := byProfile["1g.18gb"]; p.TrainingFits || !byProfile["1g.35gb"].TrainingFits {
				t.Errorf("1g.18gb fits the trainer: %+v", p)
			}
			// MPS: the highest 5 % step that holds, and the next one up misses.
			m := plan.MPS
			if m.Pct != tt.mpsPct || !m.SLOHolds || !m.Fits || m.P99MS > plan.LimitMS {
				t.Errorf("mps %+v, want %d %% holding %v ms", m, tt.mpsPct, plan.LimitMS)
			}
			if m.Pct < 100 {
				above := mpsP99(t, tt.inference, tt.rate, m.Pct+5)
				if above <= plan.LimitMS {
					t.Errorf("at %d %% the p99 is %v ms, under the limit %v: the search stopped low", m.Pct+5, above, plan.LimitMS)
				}
			}
			var table strings.Builder
			err := plan.WriteText(&table)
			if err != nil || !strings.Contains(table.String(), "best: "+strings.ToUpper(tt.best)) || !strings.Contains(table.String(), fmt.Sprintf("trainer at %d %%", tt.mpsPct)) {
				t.Errorf("table: %v\n%s", err, table.String())
			}
		})
	}
}

// mpsP99 is `colocd predict`'s inference p99 under MPS on the whole H200
// with the trainer at pct, as the plan predicts it.
func mpsP99(t *testing.T, inference string, rate float64, pct int) float64 {
	t.Helper()
	cal, err := predictor.ResolveCalibration("../predictor/presets/h200.json", "")
	if err != nil {
		t.Fatal(err)
	}
	sc := &predictor.Scenario{Inference: load(t, inference), Training: []*predictor.Profile{load(t, profilesDir+"/summary-train.json")},
		RateRPS: rate, TrainingPct: []float64{float64(pct)}, InferencePct: 100, DeviceSMs: 132, Requests: predictor.DefaultRequests, Seed: 1,
		Confidence: predictor.DefaultConfidence}
	var pr predictor.Predictor
	pred, err := pr.Predict(sc, predictor.ModeMPS, cal)
	if err != nil {
		t.Fatal(err)
	}
	return pred.Inference.LatencyMS.P99
}

// makePlan plans as colocd mig plan does with its defaults (headroom 0.1,
// 5 % steps, seed 1, the H200's calibration preset).
func makePlan(t *testing.T, inference string, rate, slo float64, requests int) *Plan {
	t.Helper()
	cal, err := predictor.ResolveCalibration("", "NVIDIA H200")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Make(Input{GPU: "NVIDIA H200", Inference: load(t, inference), Training: load(t, profilesDir+"/summary-train.json"),
		RateRPS: rate, SLOP99MS: slo, Headroom: 0.1, Requests: requests, Seed: 1, PctStep: 5, Calibration: cal})
	if err != nil {
		t.Fatal(err)
	}
	// The plan as --json prints it and reads back.
	back := jsontest.RoundTrip[Plan](t, plan)
	return &back
}

func load(t *testing.T, path string) *predictor.Profile {
	t.Helper()
	p, err := predictor.LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A plan no placement holds: MPS reports no percentage, a layout on which
// the service fits nowhere comes last, and a profile taken on a MIG
// instance is warned of.
func TestMakeNothingHolds(t *testing.T) {
	t.Parallel()
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`{"format": "colocd.profile/v1", "name": "big", "kind": "inference",
		"device": {"name": "NVIDIA H200", "sms": 60}, "memory_mib": 20000, "summary": {"latency_ms": 6, "gpu_util": 0.8, "mem_util": 0.2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := makePlan(t, big, 500, 1, 200)
	if plan.Best != "none" || plan.MPS.Pct != 0 || plan.MPS.SLOHolds || plan.MPS.LowestPct != 5 || plan.MPS.Throughput != 0 {
		t.Errorf("best %q, mps %+v: want none, and no MPS percentage", plan.Best, plan.MPS)
	}
	last := plan.Layouts[len(plan.Layouts)-1]
	if last.Layout != "1g.18gb+1g.18gb+1g.18gb+1g.18gb+1g.18gb+1g.18gb+1g.18gb" || last.Inference != "" {
		t.Errorf("last layout %+v: want seven 1g.18gb, which the 20000 MiB service fits on none of", last)
	}
	for _, l := range plan.Layouts[:len(plan.Layouts)-1] {
		if l.Inference == "" {
			t.Errorf("%s fits the service nowhere but is not last", l.Layout)
		}
	}
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "profiled on 60 SMs, not the whole GPU's 132") {
		t.Errorf("warnings %q", plan.Warnings)
	}
}

// Check passes the figures colocd mig plan defaults to, and names every
// flag whose figure is out of range, all at once.
func TestInputCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   Input
		want string // the whole error; "" for none
	}{
		{"valid", Input{RateRPS: 1, SLOP99MS: 1, Headroom: 0.1, PctStep: 5, Requests: 1}, ""},
		{"the bounds", Input{RateRPS: 0.001, SLOP99MS: 3.6e6, PctStep: 100, Requests: 1}, ""},
		{"every figure out of range", Input{RateRPS: 2e9, SLOP99MS: 3.7e6, Headroom: 1, PctStep: 101},
			"--rate: want a rate in [0.001, 1e9] req/s, got 2e+09\n--slo-p99-ms: want a p99 in (0, 3.6e6] ms, got 3.7e+06\n" +
				"--headroom: want a fraction in [0, 1), got 1\n--pct-step: want a step in [1, 100], got 101\n--requests: want a count ≥ 1, got 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.in.Check()
			if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
				t.Errorf("Check() = %v, want %q", err, tt.want)
			}
		})
	}
}
