package main

import (
	"encoding/json"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/colocd/colocd/bus"
)

// The demo runs its whole scenario against a real sidecar, NATS server and
// simulated inference server: a grant, a deny for memory, a throttle, a
// deny for the SLO, an expiry and a throttle by the guard once the load
// rises, each with what was predicted; it stops every worker it started and
// leaves nothing in the temporary directory. It takes about a minute of
// wall time, so it runs in make test's plain pass.
func TestDemo(t *testing.T) {
	if raceEnabled {
		t.Skip("a minute of wall time: make test runs it without the race detector (test-plain)")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out, errOut, err := runCLI(t, "demo", "--inference", profilesDir+"/v100-infer-200.json", "--training", profilesDir+"/v100-train-step.json", "--json")
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out, errOut)
	}
	var steps []demoStep
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, out)
	}
	admits := map[string]demoStep{}
	var pids []int
	var expired, guarded bool
	for _, s := range steps {
		pids = append(pids, s.PIDs...)
		switch s.Kind {
		case "admit":
			admits[s.Job] = s
		case "expire":
			expired = s.Job == "light-finetune"
		case "guard":
			guarded = guarded || (s.Event != nil && s.Event.Type != bus.EventRaise)
		}
	}
	for job, want := range map[string]struct{ decision, code string }{
		"light-finetune": {bus.DecisionGrant, "fits"},
		"huge-model":     {bus.DecisionDeny, "insufficient_memory"},
		"heavy-pretrain": {bus.DecisionThrottle, "throttled_to_fit"},
		"greedy-sweep":   {bus.DecisionDeny, "slo_violation"},
	} {
		s, ok := admits[job]
		if !ok || s.Decision != want.decision || s.Reason == nil || s.Reason.Code != want.code {
			t.Errorf("%s: %+v, want %s (%s)", job, s, want.decision, want.code)
			continue
		}
		// What was predicted, against which SLO, for every decision the
		// SLO made.
		if want.code != "insufficient_memory" && (len(s.Predictions) != 1 || s.Predictions[0].SLOP99MS != demoSLOMS || !(s.Predictions[0].PredictedP99MS > s.Predictions[0].SoloP99MS)) {
			t.Errorf("%s: predictions %+v, want the service's against its %d ms SLO", job, s.Predictions, demoSLOMS)
		}
	}
	if !expired || !guarded {
		t.Errorf("expired %v, guarded %v: want the light lease expired and the guard to act\n%s", expired, guarded, out)
	}
	if len(pids) < 3 {
		t.Errorf("workers %v, want at least the two granted ones and a restarted one", pids)
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
