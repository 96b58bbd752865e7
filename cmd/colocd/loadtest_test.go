package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
)

// TestLoadtestEmbedded runs a short load test against an in-process
// sidecar: every call answered, some admits, never more leases than
// max_jobs, none left after. No timing is asserted: the decision timeout
// and the launchers' wait are minutes, so a loaded machine (the first,
// cold decisions under the race detector take seconds, and eight
// launchers queue behind them) cannot turn a slow answer into a 504.
func TestLoadtestEmbedded(t *testing.T) {
	out, stderr, err := runCLI(t, "loadtest", "--embedded", "--launchers", "8", "--duration", "2s", "--max-jobs", "2",
		"--decision-timeout", "5m", "--timeout", "6m",
		"--profile", profilesDir+"/v100-train-step.json", "--service-profile", profilesDir+"/v100-infer-200.json", "--json")
	if err != nil {
		t.Fatalf("loadtest: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	var rep loadReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, out)
	}
	if rep.Errors != 0 || len(rep.Failures) != 0 {
		t.Errorf("errors %d %v, failures %v", rep.Errors, rep.ErrorsByCode, rep.Failures)
	}
	if rep.Admits == 0 || rep.Outcomes["grant"]+rep.Outcomes["throttle"] == 0 {
		t.Errorf("admits %d, outcomes %v: want some admitted", rep.Admits, rep.Outcomes)
	}
	if rep.Leases.MaxJobs != 2 || rep.Leases.Samples == 0 || rep.Leases.MaxLive > rep.Leases.MaxJobs || rep.Leases.LeftAfter != 0 {
		t.Errorf("leases %+v: want at most max_jobs 2 live, sampled, none left", rep.Leases)
	}
	counts := map[string]int{}
	for _, o := range rep.Ops {
		counts[o.Op] = o.Count
	}
	if counts[opPing] == 0 || counts[opRenew] == 0 || counts[opRenew] != counts[opRelease] {
		t.Errorf("op counts %v: want pings, and a renew and a release per lease", counts)
	}
	if p := rep.Process; p == nil || p.GoroutinesBefore == 0 || p.GoroutinesAfter == 0 {
		t.Errorf("process figures %+v: want goroutines before and after", p)
	}
}

func TestLoadtestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"embedded and server", []string{"--embedded", "--server", "nats://127.0.0.1:4222"}, "--embedded and --server: want one of the two"},
		{"no launchers", []string{"--embedded", "--launchers", "0"}, "--launchers: want 1 to 10000, got 0"},
		{"no duration", []string{"--embedded", "--duration", "0s"}, "--duration: want > 0, got 0s"},
		{"bad sidecar", []string{"--sidecar", "a b", "--profile", profilesDir + "/v100-train-step.json"}, "--sidecar:"},
		{"decision timeout range", []string{"--embedded", "--decision-timeout", "500ms"}, "--decision-timeout: want 1s to 10m, got 500ms"},
		{"decision timeout external", []string{"--sidecar", "gpu0", "--decision-timeout", "1m"}, "--decision-timeout: want --embedded"},
		{"inference profile", []string{"--embedded", "--profile", profilesDir + "/v100-infer-200.json"}, "--profile: want a training profile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"loadtest"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadtestVmRSS(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
		want          int64
		wantErr       string
	}{
		{"linux", "Name:\tcolocd\nVmPeak:\t  9000 kB\nVmRSS:\t   51234 kB\nThreads:\t9\n", 51234, ""},
		{"no line", "Name:\tcolocd\n", 0, "no VmRSS line"},
		{"garbage", "VmRSS:\tlots\n", 0, `VmRSS "\tlots"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := vmRSSKiB(path)
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got %d, %v; want %d, error containing %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := vmRSSKiB(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file read without an error")
	}
}

// A run's errors are counted by operation and code, each code's first
// message is kept, and errors or too many leases fail the run.
func TestLoadtestReportFailures(t *testing.T) {
	a, b := newTally(), newTally()
	a.record(opAdmit, time.Millisecond, nil)
	a.outcomes[bus.DecisionGrant]++
	a.record(opRenew, 0, fmt.Errorf("renew: %w", bus.NotFound("no lease l1")))
	b.record(opRenew, 0, bus.NotFound("no lease l2"))
	b.record(opStatus, 0, fmt.Errorf("status on sidecar s: %w", bus.ErrNoSidecar))
	b.record(opPing, 0, context.DeadlineExceeded)
	a.merge(b)
	rep := &loadReport{Leases: leaseStats{MaxLive: 5, MaxJobs: 4, LeftAfter: 1}}
	rep.fill(a, time.Second)
	if want := map[string]int{"renew 404": 2, "status no_sidecar": 1, "ping timeout": 1}; !maps.Equal(rep.ErrorsByCode, want) {
		t.Errorf("errors by code: got %v, want %v", rep.ErrorsByCode, want)
	}
	wantFirst := []string{
		"ping timeout: context deadline exceeded",
		"renew 404: renew: colocd error 404: no lease l1",
		"status no_sidecar: status on sidecar s: no sidecar answered",
	}
	if !slices.Equal(rep.FirstErrors, wantFirst) {
		t.Errorf("first errors:\ngot  %q\nwant %q", rep.FirstErrors, wantFirst)
	}
	wantFailures := []string{"4 calls failed", "the sidecar held 5 leases, more than max_jobs 4", "1 leases of the run still live after it"}
	if !slices.Equal(rep.Failures, wantFailures) {
		t.Errorf("failures:\ngot  %q\nwant %q", rep.Failures, wantFailures)
	}
	var out bytes.Buffer
	if err := rep.print(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"errors: 4 (ping timeout 1, renew 404 2, status no_sidecar 1)", "FAILED: 4 calls failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
