package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/predictor/kineto"
)

const kinetoDir = "../../testdata/kineto"

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errw bytes.Buffer
	err = run(context.Background(), args, &out, &errw)
	return out.String(), errw.String(), err
}

func TestProfileImport(t *testing.T) {
	if raceEnabled {
		t.Skip("CPU-bound (real traces parsed, fits); the race detector makes it 5x slower and finds nothing in it: make test runs it in its plain pass")
	}
	dir := t.TempDir()
	tests := []struct {
		name       string
		args       []string // after "profile import"; {out} is replaced by the output path
		wantOut    string   // exact stdout, {out} replaced
		wantErrOut []string // substrings of stderr
		check      func(t *testing.T, p *predictor.Profile)
	}{
		{
			name:    "v100 median step",
			args:    []string{"--format", "kineto", "--out", "{out}", kinetoDir + "/v100-training-5steps.json.gz"},
			wantOut: "v100-training-5steps: training, 870 ops, span 95.663 ms, Tesla V100-SXM2-32GB (80 SMs), ProfilerStep#104 → {out}\n",
		},
		{
			name: "v100 step, kind and name",
			args: []string{"--format=kineto", "--kind", "inference", "--step", "102", "--name", "r50", "-o", "{out}",
				kinetoDir + "/v100-training-5steps.json.gz"},
			wantOut: "r50: inference, 870 ops, span 95.736 ms, Tesla V100-SXM2-32GB (80 SMs), ProfilerStep#102 → {out}\n",
			check: func(t *testing.T, p *predictor.Profile) {
				if p.Name != "r50" || p.Kind != predictor.KindInference || p.Source.Unit != "ProfilerStep#102" {
					t.Errorf("got name %q kind %q unit %q, want r50, inference, ProfilerStep#102", p.Name, p.Kind, p.Source.Unit)
				}
			},
		},
		{
			name: "annotation and max ops",
			args: []string{"--format", "kineto", "--annotation", "DistributedDataParallel.forward", "--max-ops", "10", "--out", "{out}",
				kinetoDir + "/v100-training-5steps.json.gz"},
			check: func(t *testing.T, p *predictor.Profile) {
				if len(p.Ops) != 10 || p.Source.Unit != "annotation DistributedDataParallel.forward (first 10 kernels)" {
					t.Errorf("got %d ops, unit %q; want 10 ops of the DDP forward annotation", len(p.Ops), p.Source.Unit)
				}
			},
		},
		{
			name:       "multistream: unknown device, notes on stderr",
			args:       []string{"--format", "kineto", "--out", "{out}", kinetoDir + "/multistream-training-2steps.json.gz"},
			wantOut:    "multistream-training-2steps: training, 577 ops, span 600.030 ms, device unknown, ProfilerStep#551 → {out}\n",
			wantErrOut: []string{"note: device: the trace has no deviceProperties", "note: 134 of 577 kernels overlapped"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.Repeat("p", i+1)+".json")
			args := []string{"profile", "import"}
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "{out}", out))
			}
			stdout, stderr, err := runCLI(t, args...)
			if err != nil {
				t.Fatalf("run %q: %v (stderr %q)", args, err, stderr)
			}
			if want := strings.ReplaceAll(tt.wantOut, "{out}", out); tt.wantOut != "" && stdout != want {
				t.Errorf("stdout:\n got %q\nwant %q", stdout, want)
			}
			if tt.wantErrOut == nil && stderr != "" {
				t.Errorf("stderr: got %q, want nothing", stderr)
			}
			for _, s := range tt.wantErrOut {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr: got %q, want it to contain %q", stderr, s)
				}
			}
			p, err := predictor.LoadProfile(out)
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
}

func TestProfileImportErrors(t *testing.T) {
	if raceEnabled {
		t.Skip("CPU-bound (real traces parsed, fits); the race detector makes it 5x slower and finds nothing in it: make test runs it in its plain pass")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "p.json")
	v100 := kinetoDir + "/v100-training-5steps.json.gz"
	tests := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{"no format", []string{"--out", out, v100}, []string{"--format", "kineto", `got ""`}},
		{"unknown format", []string{"--format", "nsys", "--out", out, v100}, []string{"--format: want one of kineto", `got "nsys"`}},
		{"no out", []string{"--format", "kineto", v100}, []string{"--out"}},
		{"bad kind", []string{"--format", "kineto", "--kind", "batch", "--out", out, v100}, []string{"--kind", "inference or training"}},
		{"no trace", []string{"--format", "kineto", "--out", out}, []string{"accepts 1 arg"}},
		{"missing trace file", []string{"--format", "kineto", "--out", out, filepath.Join(dir, "none.json")}, []string{"no such file"}},
		{"unknown step", []string{"--format", "kineto", "--step", "3", "--out", out, v100}, []string{"no ProfilerStep#3", "ProfilerStep#101"}},
		{"truncated trace", []string{"--format", "kineto", "--out", out, kinetoDir + "/a100-truncated.json.gz"}, []string{"invalid trace", "truncated"}},
		{"unwritable out", []string{"--format", "kineto", "--out", filepath.Join(dir, "no", "dir", "p.json"), v100}, []string{"write"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _, err := runCLI(t, append([]string{"profile", "import"}, tt.args...)...)
			if err == nil {
				t.Fatalf("got success (stdout %q), want an error", stdout)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("got %q, want it to contain %q", err, s)
				}
			}
			if _, statErr := os.Stat(out); statErr == nil {
				t.Errorf("%s was written, want no output on error", out)
			}
		})
	}
}

func TestProfileValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"format": "colocd.profile/v1", "name": "bad", "kind": "batch", "ops": [{"dur_us": 1, "gap_us": 0, "sm": 2, "occupancy": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	good := "../../testdata/profiles/v100-infer-200.json"
	tests := []struct {
		name       string
		files      []string
		wantOut    string
		wantErrOut []string
		wantErr    string
	}{
		{name: "committed profiles", files: []string{good, "../../testdata/profiles/v100-train-step.json"},
			wantOut: "ok v100-infer-200 (" + good + ")\nok v100-train-step (../../testdata/profiles/v100-train-step.json)\n"},
		{name: "one bad, one missing", files: []string{bad, good, filepath.Join(dir, "none.json")},
			wantOut:    "ok v100-infer-200 (" + good + ")\n",
			wantErrOut: []string{"FAIL load profile " + bad, "kind: want", "ops[0].sm: want a fraction", "FAIL load profile: open"},
			wantErr:    "2 of 3 profiles invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runCLI(t, append([]string{"profile", "validate"}, tt.files...)...)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got error %v, want %q", err, tt.wantErr)
			}
			if stdout != tt.wantOut {
				t.Errorf("stdout:\n got %q\nwant %q", stdout, tt.wantOut)
			}
			for _, s := range tt.wantErrOut {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr: got %q, want it to contain %q", stderr, s)
				}
			}
		})
	}
	if _, _, err := runCLI(t, "profile", "validate"); err == nil {
		t.Error("validate with no files: got success, want an error")
	}
	// --json: one entry per file, in order, the failures with their error.
	stdout, _, err := runCLI(t, "profile", "validate", "--json", good, bad)
	var got []validated
	if jerr := json.Unmarshal([]byte(stdout), &got); jerr != nil || err == nil || len(got) != 2 {
		t.Fatalf("validate --json: %v, %v, %s", err, jerr, stdout)
	}
	if !got[0].OK || got[0].Name != "v100-infer-200" || got[0].Kind != "inference" || got[1].OK || !strings.Contains(got[1].Error, "kind: want") {
		t.Errorf("validate --json: %+v", got)
	}
}

// profile import --json says what the line says, as JSON.
func TestProfileImportJSON(t *testing.T) {
	if raceEnabled {
		t.Skip("CPU-bound (real traces parsed, fits); the race detector makes it 5x slower and finds nothing in it: make test runs it in its plain pass")
	}
	out := filepath.Join(t.TempDir(), "p.json")
	stdout, _, err := runCLI(t, "profile", "import", "--json", "--format", "kineto", "--out", out, kinetoDir+"/v100-training-5steps.json.gz")
	var got kineto.Summary
	if err != nil || json.Unmarshal([]byte(stdout), &got) != nil {
		t.Fatalf("import --json: %v\n%s", err, stdout)
	}
	if got.Name != "v100-training-5steps" || got.Kind != "training" || got.Ops != 870 || got.SMs != 80 || got.Unit != "ProfilerStep#104" || got.Out != out || got.SpanMS < 95 || got.SpanMS > 96 {
		t.Errorf("import --json: %+v", got)
	}
}
