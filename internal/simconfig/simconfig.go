// Package simconfig writes, in tests, the config file of a sidecar on a
// simulated GPU with one inference service, for tests that run a sidecar
// from a file it watches and edit the file to reload it.
package simconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// File is what the config file says.
type File struct {
	ID, DataDir string
	// Listen is the embedded NATS server's address.
	Listen string
	// Requests is how many requests the predictor simulates.
	Requests int
	// Profile is the path of the service's profile (made absolute in the
	// file); it serves 8 requests a second with a p99 SLO of SLOMS.
	Profile string
	SLOMS   float64
	// Admission is the admission section, in YAML's flow style without
	// its braces ("max_jobs: 3"); "" leaves every key at its default but
	// decision_timeout, a minute unless it is named.
	Admission string
}

// Write replaces the file at path with f as editors and ConfigMap swaps
// do: written beside it, then renamed over it.
func Write(t testing.TB, path string, f File) {
	t.Helper()
	admission := f.Admission
	if !strings.Contains(admission, "decision_timeout") {
		// Tests of anything but the decision's deadline: on a machine busy
		// with other jobs a decision can take more than the default 5 s.
		admission = strings.TrimSuffix("decision_timeout: 1m, "+admission, ", ")
	}
	profile, err := filepath.Abs(f.Profile)
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`sidecar: {id: %s, data_dir: %q}
nats: {listen: %q}
gpu: {backend: sim}
predictor: {requests: %d, confidence: 0}
telemetry: {http: "127.0.0.1:0"}
services:
  - {name: v100-infer, profile: %q, rate_rps: 8, slo: {p99_ms: %g}}
admission: {%s}
`, f.ID, f.DataDir, f.Listen, f.Requests, profile, f.SLOMS, admission)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
