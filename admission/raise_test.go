package admission

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// guardFor calls Guard once a second for d and returns its events.
func guardFor(t *testing.T, c *Controller, d time.Duration) []Event {
	t.Helper()
	var out []Event
	for end := time.Now().Add(d); time.Now().Before(end); {
		evs, err := c.Guard(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
		time.Sleep(time.Second)
	}
	return out
}

// A lease lowered by a tighter SLO is offered its percentage back with a
// raise event only once the looser SLO has held for RaiseAfter; a raise
// the launcher ignored asks for no restart when the lease is lowered
// again to a percentage its workers already run under.
func TestRaiseAfterTheMarginHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100}
	two := func(a, b float64) float64 {
		return p99At(t, predictor.ModeMPS, svc, []*predictor.Profile{trainingProfile("resnet"), trainingProfile("resnet")}, []float64{a, b})
	}
	tight := two(100, 50) / 0.9 * (1 + 1e-9) // the second job fits at 50 %, just
	synctest.Test(t, func(t *testing.T) {
		h, _, b := twoLeases(t)
		evs, err := h.c.UpdateServices(ctx, withSLO(h, tight), 0.1)
		if err != nil || len(evs) != 1 || evs[0].Pct != 50 {
			t.Fatalf("events %+v, %v; want the second lease throttled to 50 %%", evs, err)
		}
		time.Sleep(time.Second)
		if err := h.c.Register(ctx, b.Lease.ID, tokenOf(b), []int{4242}); err != nil { // restarted at 50 %
			t.Fatal(err)
		}
		if _, err := h.c.UpdateServices(ctx, withSLO(h, 100), 0.1); err != nil { // loose again
			t.Fatal(err)
		}
		if evs := guardFor(t, h.c, DefaultRaiseAfter); len(evs) != 0 {
			t.Fatalf("events %+v before the margin held for %s", evs, DefaultRaiseAfter)
		}
		evs = guardFor(t, h.c, 2*raiseCheck)
		if len(evs) != 1 || evs[0].Type != EventRaise || evs[0].LeaseID != b.Lease.ID || evs[0].Pct != 100 ||
			evs[0].Env[EnvActiveThreads] != "100" || !evs[0].Deadline.IsZero() || !strings.Contains(evs[0].Reason, "may run at 100 %") {
			t.Fatalf("events %+v, want one raise of the second lease to 100 %% without a deadline", evs)
		}
		if s := stored(t, h.store, b.Lease.ID); s.Pct != 100 || s.RunningPct != 50 {
			t.Errorf("stored pct %d running %d, want 100 and 50", s.Pct, s.RunningPct)
		}
		// The launcher ignored the raise; the SLO tightens to what allows
		// 60 %: a throttle that needs no restart, and so no revoke later.
		evs, err = h.c.UpdateServices(ctx, withSLO(h, two(100, 60)/0.9*(1+1e-9)), 0.1)
		if err != nil || len(evs) != 1 || evs[0].Type != EventThrottle || evs[0].Pct != 60 || !evs[0].Deadline.IsZero() {
			t.Fatalf("events %+v, %v; want a throttle to 60 %% with no deadline", evs, err)
		}
		stop := runController(t, h.c)
		defer stop()
		time.Sleep(2 * DefaultThrottleGrace)
		if ls := h.c.Leases(); len(ls) != 2 || ls[1].Revoked {
			t.Errorf("leases %+v, want both, none revoked", ls)
		}
	})
}
