package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// The scenarios a sidecar once ran end to end, each through its own NATS
// server and lease store, decided here by the controller itself: the
// sidecar keeps one of each over the wire (sidecar.TestDecisions,
// sidecar.TestThrottleIgnoredEvictsThroughTheDaemon).

// TestDecisionScenarios causes each outcome for a real reason, with SLOs
// set from what the predictor gives at 10 and 100 %, and checks that a
// decision's predicted p99 is what the predictor says for the same inputs.
func TestDecisionScenarios(t *testing.T) {
	t.Parallel()
	at := func(pct int) float64 { return resnetP99(t, float64(pct)) }
	p10, p100 := at(10), at(100)
	if !(p10 < p100) {
		t.Fatalf("p99 at 10 %% = %v, at 100 %% = %v: the scenario has no room to throttle", p10, p100)
	}
	tests := []struct {
		name    string
		slo     float64 // the SLO; admission keeps p99 within 90 % of it
		memory  int
		outcome Outcome
		code    ReasonCode
	}{
		{"grant: loose SLO", p100 / 0.9 * 1.05, 4096, Grant, CodeFits},
		{"throttle: only lower percentages fit", (p10 + p100) / 2 / 0.9, 4096, Throttle, CodeThrottledToFit},
		{"deny: even 10 % breaks the SLO", p10 * 0.95 / 0.9, 4096, Deny, CodeSLOViolation},
		{"deny: not enough GPU memory", p100 * 2, 200_000, Deny, CodeInsufficientMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, predictor.ModeMPS, tt.slo, nil)
			req := request("r1")
			req.MemoryMiB = tt.memory
			d, err := h.c.Decide(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != tt.outcome || d.Code != tt.code {
				t.Fatalf("decision %s (%s: %s), want %s (%s)", d.Outcome, d.Code, d.Message, tt.outcome, tt.code)
			}
			if tt.outcome == Deny {
				if d.Lease != nil || d.Env != nil {
					t.Errorf("a deny carries a lease %+v and env %v", d.Lease, d.Env)
				}
				return
			}
			l := d.Lease
			if l == nil || l.Pct != d.Pct || d.Env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != fmt.Sprint(l.Pct) {
				t.Fatalf("lease %+v, env %v: want the percentage in the env", l, d.Env)
			}
			if got, want := d.Predictions[0].PredictedP99MS, at(l.Pct); got != want {
				t.Errorf("predicted p99 %v ms at %d %%, the predictor gives %v", got, l.Pct, want)
			}
			if tt.outcome == Throttle && !(l.Pct > 10 && l.Pct < 100) {
				t.Errorf("throttled to %d %%", l.Pct)
			}
		})
	}
}

// A launcher that restarts its workers at the new percentage and
// registers them keeps its lease, and cannot pass off a worker that ran
// before the throttle as restarted; the replaced one is kept to evict at
// the deadline.
func TestThrottleHonouredKeepsTheLease(t *testing.T) {
	t.Parallel()
	p10, p100 := resnetP99(t, 10), resnetP99(t, 100)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, predictor.ModeMPS, p100/0.9*1.05, nil)
		host := fakeClock{}
		h.c.deps.Processes = host
		d := mustDecide(t, h, request("h"), Grant)
		const old, fresh = 100, 200
		host[old] = time.Now()
		if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{old}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(startSlack + 100*time.Millisecond) // the old worker ran well before the throttle
		evs, err := h.c.UpdateServices(ctx, withSLO(h, (p10+p100)/2/0.9), 0.1)
		if err != nil || len(evs) != 1 || evs[0].Type != EventThrottle {
			t.Fatalf("events %+v, %v; want the lease throttled", evs, err)
		}
		// The old worker is still running: it cannot be registered again as
		// a restarted one.
		err = h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{old})
		if err == nil || !strings.Contains(err.Error(), "last throttled") {
			t.Fatalf("re-register of the worker started before the throttle: %v, want a refusal", err)
		}
		time.Sleep(startSlack + 100*time.Millisecond)
		host[fresh] = time.Now()
		if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{fresh}); err != nil {
			t.Fatal(err)
		}
		ls := h.c.Leases()
		if len(ls) != 1 || ls[0].Revoked || ls[0].Pct >= 100 || len(ls[0].Retired) != 1 || ls[0].Retired[0].PID != old {
			t.Fatalf("leases %+v, want the lease throttled with its old worker to evict at the deadline", ls)
		}
	})
}
