//go:build slow && !race

// A minute of wall time, most of it waiting: make test runs this file in its
// plain pass, beside the race pass.
// It also carries the slow tag: a plain go test ./... leaves it to make test
// (go test -tags slow runs it).

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"
)

const profilesDir = "../testdata/profiles"

// The demo runs its whole scenario against a real sidecar, NATS server and
// simulated inference server: a grant, a deny for memory, a throttle, a
// deny for the SLO, an expiry and a throttle by the guard once the load
// rises, each with what was predicted; it stops every worker it started and
// leaves nothing in the temporary directory. It takes about 70 s of
// wall time, so it runs in make test's plain pass.
func TestDemo(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var errOut strings.Builder
	got, err := Run(context.Background(), Config{Inference: profilesDir + "/v100-infer-200.json", Training: profilesDir + "/v100-train-step.json",
		Quiet: true, Log: &errOut, Version: "0.0.0-dev"})
	// The account as --json prints it and reads back.
	out, jerr := json.Marshal(got)
	if err != nil || jerr != nil {
		t.Fatalf("demo: %v %v\n%s\n%s", err, jerr, out, errOut.String())
	}
	var steps []Step
	if err := json.Unmarshal(out, &steps); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, out)
	}
	admits := map[string]Step{}
	seen := map[int]bool{}
	var pids []int
	var expired, restarted bool
	for _, s := range steps {
		for _, pid := range s.PIDs {
			if !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
		switch s.Kind {
		case "admit":
			admits[s.Job] = s
		case "expire":
			expired = expired || s.Job == "light-finetune"
		case "guard":
			// A throttle by the guard once the load rose, below what the job
			// was admitted at, that the launcher answered by restarting its
			// worker (the old pid, then a new one).
			if ev := s.Event; ev != nil && ev.Type == v1.EventThrottle && ev.Deadline != nil && s.AtSeconds >= riseAt.Seconds() &&
				s.Pct < admits[s.Job].Pct && len(s.PIDs) == 2 && s.PIDs[0] != s.PIDs[1] && s.PIDs[1] != 0 {
				restarted = true
			}
		}
	}
	for _, a := range asks {
		s, ok := admits[a.job]
		if !ok || s.Decision != a.want || s.Reason == nil || s.Reason.Code != a.wantCode {
			t.Errorf("%s: %+v, want %s (%s)", a.job, s, a.want, a.wantCode)
			continue
		}
		// What was predicted, against which SLO, for every decision the
		// SLO made.
		if a.wantCode != "insufficient_memory" && (len(s.Predictions) != 1 || s.Predictions[0].SLOP99MS != SLOMS || !(s.Predictions[0].PredictedP99MS > s.Predictions[0].SoloP99MS)) {
			t.Errorf("%s: predictions %+v, want the service's against its %d ms SLO", a.job, s.Predictions, SLOMS)
		}
	}
	if !expired || !restarted {
		t.Errorf("expired %v, throttled and restarted %v: want the light lease expired, and the guard to lower a job whose worker restarts\n%s", expired, restarted, out)
	}
	if len(pids) < 3 {
		t.Errorf("workers %v, want the two granted ones and a restarted one", pids)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("worker %d: kill 0 = %v, want it gone", pid, err)
		}
	}
	if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 0 {
		t.Errorf("the temporary directory holds %v (%v), want nothing left", ents, err)
	}
}
