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
)

const kinetoDir = "../../testdata/kineto"

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errw bytes.Buffer
	err = run(context.Background(), args, &out, &errw)
	return out.String(), errw.String(), err
}

func TestProfileValidate(t *testing.T) {
	t.Parallel()
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
	var got []predictor.FileCheck
	if jerr := json.Unmarshal([]byte(stdout), &got); jerr != nil || err == nil || len(got) != 2 {
		t.Fatalf("validate --json: %v, %v, %s", err, jerr, stdout)
	}
	if !got[0].OK || got[0].Name != "v100-infer-200" || got[0].Kind != "inference" || got[1].OK || !strings.Contains(got[1].Error, "kind: want") {
		t.Errorf("validate --json: %+v", got)
	}
}
