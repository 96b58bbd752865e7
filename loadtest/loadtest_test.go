package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/jsontest"
	"github.com/colocd/colocd/launch"
)

const profilesDir = "../testdata/profiles"

// TestRunEmbedded runs a short load test against an in-process
// sidecar: every call answered, some admits, never more leases than
// max_jobs, none left after. No timing is asserted: the decision timeout
// and the launchers' wait are minutes, so a loaded machine (the first,
// cold decisions under the race detector take seconds, and eight
// launchers queue behind them) cannot turn a slow answer into a 504.
func TestRunEmbedded(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	got, err := Run(context.Background(), Config{Embedded: true, Launchers: 8, Duration: 2 * time.Second, MaxJobs: 2,
		DecisionTimeout: 5 * time.Minute, Endpoint: launch.Endpoint{Timeout: 6 * time.Minute},
		Profile: profilesDir + "/v100-train-step.json", SendProfile: launch.SendAuto, MemoryMiB: 1000,
		ServiceProfile: profilesDir + "/v100-infer-200.json", Version: "0.0.0-dev", Log: &log})
	if err != nil {
		t.Fatalf("loadtest: %v\nsidecar log:\n%s", err, log.String())
	}
	// The report as --json prints it and reads back.
	rep := jsontest.RoundTrip[Report](t, got)
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

func TestVmRSS(t *testing.T) {
	t.Parallel()
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
func TestReportFailures(t *testing.T) {
	t.Parallel()
	a, b := newTally(), newTally()
	a.record(opAdmit, time.Millisecond, nil)
	a.outcomes[v1.DecisionGrant]++
	a.record(opRenew, 0, fmt.Errorf("renew: %w", v1.NotFound("no lease l1")))
	b.record(opRenew, 0, v1.NotFound("no lease l2"))
	b.record(opStatus, 0, fmt.Errorf("status on sidecar s: %w", v1.ErrNoSidecar))
	b.record(opPing, 0, context.DeadlineExceeded)
	a.merge(b)
	rep := &Report{Leases: LeaseStats{MaxLive: 5, MaxJobs: 4, LeftAfter: 1}}
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
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"errors: 4 (ping timeout 1, renew 404 2, status no_sidecar 1)", "FAILED: 4 calls failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
