package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// mig layouts prints the H200's 38 maximal layouts from the cited table,
// each instance with its SMs, memory and place; a GPU without a table or no
// --gpu is an error naming the flag.
func TestMIGLayouts(t *testing.T) {
	out, _, err := runCLI(t, "mig", "layouts", "--gpu", "NVIDIA H200", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var layouts []migLayoutJSON
	if err := json.Unmarshal([]byte(out), &layouts); err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	if len(layouts) != 38 {
		t.Errorf("%d layouts, want 38", len(layouts))
	}
	found := false
	for _, l := range layouts {
		if l.Layout == "4g.71gb+3g.71gb" {
			found = true
			want := []migInstanceJSON{{Profile: "4g.71gb", Start: 0, MemorySlices: 4, Slices: 4, SMs: 64, MemoryMiB: 71168},
				{Profile: "3g.71gb", Start: 4, MemorySlices: 4, Slices: 3, SMs: 60, MemoryMiB: 71168}}
			if l.Slices != 7 || len(l.Instances) != 2 || l.Instances[0] != want[0] || l.Instances[1] != want[1] {
				t.Errorf("4g+3g: %+v, want %+v in 7 compute slices", l, want)
			}
		}
	}
	if !found {
		t.Error("no 4g.71gb+3g.71gb layout")
	}
	table, _, err := runCLI(t, "mig", "layouts", "--gpu", "NVIDIA H200")
	if err != nil || !strings.Contains(table, "7g.141gb  ") || !strings.Contains(table, "3g.71gb@4: 60 SMs, 71168 MiB") {
		t.Errorf("table: %v\n%s", err, table)
	}
	for args, want := range map[string]string{
		"--gpu\x00Tesla V100": `--gpu: no MIG profiles for device "Tesla V100"`,
		"":                    "--gpu: want a GPU name",
	} {
		a := []string{"mig", "layouts"}
		if args != "" {
			a = append(a, strings.Split(args, "\x00")...)
		}
		if _, _, err := runCLI(t, a...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", args, err, want)
		}
	}
}

// The scripted plans: an inference service whose kernels fill about a third
// of an H200 (sm_util/gpu_util = 0.35) under a tight SLO, where a 3g
// instance loses it nothing and MPS must throttle the trainer to 15 %; and
// BERT-like kernels that fill the GPU, where MPS keeps the trainer at 100 %
// and beats every layout.
func TestMIGPlan(t *testing.T) {
	for _, tt := range []struct {
		name, inference, rate, slo string
		best, first, infOn, trOn   string
		mpsPct                     int
	}{
		{"small kernels, tight SLO", "testdata/mig/small-kernel-infer.json", "50", "20", "mig", "4g.71gb+3g.71gb", "3g.71gb", "4g.71gb", 15},
		{"kernels that fill the GPU", profilesDir + "/summary-bert.json", "20", "40", "mps", "4g.71gb+3g.71gb", "3g.71gb", "4g.71gb", 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"mig", "plan", "--gpu", "NVIDIA H200", "--inference", tt.inference, "--training", profilesDir + "/summary-train.json",
				"--rate", tt.rate, "--slo-p99-ms", tt.slo}
			out, _, err := runCLI(t, append(args, "--json")...)
			if err != nil {
				t.Fatal(err)
			}
			var plan migPlan
			if err := json.Unmarshal([]byte(out), &plan); err != nil {
				t.Fatalf("decode: %v\n%s", err, out)
			}
			if plan.Best != tt.best || len(plan.Layouts) != 38 {
				t.Fatalf("best %q over %d layouts, want %q over 38", plan.Best, len(plan.Layouts), tt.best)
			}
			if l := plan.Layouts[0]; l.Layout != tt.first || l.Inference != tt.infOn || l.Training != tt.trOn || !l.SLOHolds || len(l.Spare) != 0 {
				t.Errorf("first %+v, want %s with the service on %s and the trainer on %s", l, tt.first, tt.infOn, tt.trOn)
			}
			byProfile := map[string]planProfile{}
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
			table, _, err := runCLI(t, args...)
			if err != nil || !strings.Contains(table, "best: "+strings.ToUpper(tt.best)) || !strings.Contains(table, fmt.Sprintf("trainer at %d %%", tt.mpsPct)) {
				t.Errorf("table: %v\n%s", err, table)
			}
		})
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no gpu", []string{"--inference", "x", "--training", "y", "--rate", "1", "--slo-p99-ms", "1"}, "--gpu: want a GPU name"},
		{"unknown gpu", []string{"--gpu", "Tesla V100", "--inference", profilesDir + "/summary-bert.json", "--training", profilesDir + "/summary-train.json", "--rate", "1", "--slo-p99-ms", "1"}, `--gpu: no MIG profiles for device "Tesla V100"`},
		{"bad numbers", []string{"--gpu", "NVIDIA H200", "--inference", "x", "--training", "y", "--rate", "0", "--slo-p99-ms", "-1", "--headroom", "1"},
			"--rate: want a rate in [0.001, 1e9] req/s, got 0\n--slo-p99-ms: want a p99 in (0, 3.6e6] ms, got -1\n--headroom: want a fraction in [0, 1), got 1"},
		{"swapped kinds", []string{"--gpu", "NVIDIA H200", "--inference", profilesDir + "/summary-train.json", "--training", profilesDir + "/summary-train.json", "--rate", "1", "--slo-p99-ms", "1"}, `kind: want "inference", got "training"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := runCLI(t, append([]string{"mig", "plan"}, tt.args...)...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// mpsP99 is `colocd predict`'s inference p99 under MPS on the whole H200
// with the trainer at pct, as the plan predicts it.
func mpsP99(t *testing.T, inference, rate string, pct int) float64 {
	t.Helper()
	out, _, err := runCLI(t, "predict", "--json", "--mode", "mps", "--inference", inference, "--training", profilesDir+"/summary-train.json",
		"--rate", rate, "--pct", fmt.Sprint(pct), "--sms", "132", "--calibration", "../../predictor/presets/h200.json")
	if err != nil {
		t.Fatal(err)
	}
	var pred predictor.Prediction
	if err := json.Unmarshal([]byte(out), &pred); err != nil {
		t.Fatal(err)
	}
	return pred.Inference.LatencyMS.P99
}

// A plan no placement holds: MPS reports no percentage, a layout on which
// the service fits nowhere comes last, and a profile taken on a MIG
// instance is warned of.
func TestMIGPlanNothingHolds(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`{"format": "colocd.profile/v1", "name": "big", "kind": "inference",
		"device": {"name": "NVIDIA H200", "sms": 60}, "memory_mib": 20000, "summary": {"latency_ms": 6, "gpu_util": 0.8, "mem_util": 0.2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "mig", "plan", "--gpu", "NVIDIA H200", "--inference", big, "--training", profilesDir+"/summary-train.json",
		"--rate", "500", "--slo-p99-ms", "1", "--requests", "200", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var plan migPlan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
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
