package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/colocd/colocd/migplan"
)

// mig layouts prints the H200's 38 maximal layouts from the cited table,
// each instance with its SMs, memory and place; a GPU without a table or no
// --gpu is an error naming the flag.
func TestMIGLayouts(t *testing.T) {
	t.Parallel()
	out, _, err := runCLI(t, "mig", "layouts", "--gpu", "NVIDIA H200", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var layouts []migplan.LayoutInfo
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
			want := []migplan.InstanceInfo{{Profile: "4g.71gb", Start: 0, MemorySlices: 4, Slices: 4, SMs: 64, MemoryMiB: 71168},
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

// colocd mig plan checks its flags and files before it plans: every
// number wrong at once, an unknown GPU, profiles of the wrong kind.
func TestMIGPlanFlags(t *testing.T) {
	t.Parallel()
	wantRefusals(t, []string{"mig", "plan"}, []refusal{
		{"no gpu", []string{"--inference", "x", "--training", "y", "--rate", "1", "--slo-p99-ms", "1"}, "--gpu: want a GPU name"},
		{"unknown gpu", []string{"--gpu", "Tesla V100", "--inference", profilesDir + "/summary-bert.json", "--training", profilesDir + "/summary-train.json", "--rate", "1", "--slo-p99-ms", "1"}, `--gpu: no MIG profiles for device "Tesla V100"`},
		{"bad numbers", []string{"--gpu", "NVIDIA H200", "--inference", "x", "--training", "y", "--rate", "0", "--slo-p99-ms", "-1", "--headroom", "1"},
			"--rate: want a rate in [0.001, 1e9] req/s, got 0\n--slo-p99-ms: want a p99 in (0, 3.6e6] ms, got -1\n--headroom: want a fraction in [0, 1), got 1"},
		{"numbers that are not", []string{"--gpu", "NVIDIA H200", "--inference", "x", "--training", "y", "--rate", "NaN", "--slo-p99-ms", "NaN", "--headroom", "NaN"},
			"--rate: want a rate in [0.001, 1e9] req/s, got NaN\n--slo-p99-ms: want a p99 in (0, 3.6e6] ms, got NaN\n--headroom: want a fraction in [0, 1), got NaN"},
		{"swapped kinds", []string{"--gpu", "NVIDIA H200", "--inference", profilesDir + "/summary-train.json", "--training", profilesDir + "/summary-train.json", "--rate", "1", "--slo-p99-ms", "1"}, `kind: want "inference", got "training"`},
	})
}
