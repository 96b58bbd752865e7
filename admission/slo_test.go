package admission

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
	"github.com/google/go-cmp/cmp"
)

// twoLeases grants two jobs at 100 % under a loose SLO, a second apart (it
// sleeps: call it in a bubble).
func twoLeases(t *testing.T) (*harness, Decision, Decision) {
	t.Helper()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	first := request("first")
	// Of higher priority, so that a re-plan lowers the second by the rule;
	// leases of one priority share what is left jointly (TestGuardLowersJointly).
	first.LeaseSeconds, first.Priority = 3600, 1
	a := mustDecide(t, h, first, Grant)
	time.Sleep(time.Second)
	second := request("second")
	second.LeaseSeconds = 3600
	b := mustDecide(t, h, second, Grant)
	return h, a, b
}

func withSLO(h *harness, slo float64) []ServiceSpec {
	svc := h.c.cfg.Services[0]
	svc.SLOP99MS = slo
	return []ServiceSpec{svc}
}

func TestUpdateServices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	one := resnetP99(t, 10)

	t.Run("a looser SLO changes nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, _, _ := twoLeases(t)
			evs, err := h.c.UpdateServices(ctx, withSLO(h, 200), 0.1)
			if err != nil || len(evs) != 0 {
				t.Fatalf("events %v, err %v", evs, err)
			}
		})
	})

	t.Run("a tighter SLO throttles the newest lease", func(t *testing.T) {
		slo := sloJustFitting(resnetP99(t, 100, 50)) // the second job fits at 50 %, just
		synctest.Test(t, func(t *testing.T) {
			h, a, b := twoLeases(t)
			evs, err := h.c.UpdateServices(ctx, withSLO(h, slo), 0.1)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(DefaultThrottleGrace)
			if len(evs) != 1 || evs[0].Type != EventThrottle || evs[0].LeaseID != b.Lease.ID || evs[0].Pct != 50 || !evs[0].Deadline.Equal(deadline) {
				t.Fatalf("events %+v, want a throttle of the second lease to 50 %% by %s", evs, deadline)
			}
			if diff := cmp.Diff(evs, h.events.all()); diff != "" {
				t.Errorf("published events (-returned +published):\n%s", diff)
			}
			s := stored(t, h.store, b.Lease.ID)
			if s.Pct != 50 || !s.Deadline.Equal(deadline) || stored(t, h.store, a.Lease.ID).Pct != 100 {
				t.Errorf("stored %+v", s)
			}
			// The new SLO governs new requests, with the second lease at 50 %.
			if d, _ := h.c.Quote(ctx, request("third")); d.Outcome != Deny {
				t.Errorf("a third job: %s (%s)", d.Outcome, d.Message)
			}
		})
	})

	t.Run("an SLO nothing fits revokes, newest first", func(t *testing.T) {
		slo := (one + resnetP99(t, 10, 10)) / 2 / 0.9 // the first alone at 10 % fits, both at 10 % do not
		synctest.Test(t, func(t *testing.T) {
			h, a, b := twoLeases(t)
			evs, err := h.c.UpdateServices(ctx, withSLO(h, slo), 0.1)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].Type != EventThrottle || evs[0].LeaseID != a.Lease.ID || evs[0].Pct != 10 ||
				evs[1].Type != EventRevoke || evs[1].LeaseID != b.Lease.ID {
				t.Fatalf("events %+v, want the first throttled to 10 %% and the second revoked", evs)
			}
			deadline := time.Now().Add(DefaultThrottleGrace)
			if s := stored(t, h.store, b.Lease.ID); !s.Revoked || !s.ExpiresAt.Equal(deadline) {
				t.Errorf("revoked lease stored as %+v", s)
			}
			if _, err := h.c.Renew(ctx, b.Lease.ID, tokenOf(b)); !errors.Is(err, ErrConflict) {
				t.Errorf("renew of a revoked lease: %v", err)
			}
			// The first job restarts at 10 % and registers its workers;
			// at the deadline the revoked lease expires.
			if err := h.c.Register(ctx, a.Lease.ID, tokenOf(a), []int{4242}); err != nil {
				t.Fatal(err)
			}
			h.events.ch = make(chan Event, 1)
			stop := runController(t, h.c)
			defer stop()
			time.Sleep(DefaultThrottleGrace)
			if ev := nextEvent(t, h.events.ch); ev.Type != EventExpire || ev.LeaseID != b.Lease.ID || ev.Reason != "the revoked lease reached its deadline" {
				t.Errorf("event %+v", ev)
			}
		})
	})

	t.Run("invalid services change nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, _, _ := twoLeases(t)
			if _, err := h.c.UpdateServices(ctx, withSLO(h, 1), 1.5); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v", err)
			}
			if h.c.cfg.Services[0].SLOP99MS != 100 || h.c.cfg.Headroom != 0.1 || len(h.events.all()) != 0 {
				t.Error("an invalid update changed the config or published")
			}
		})
	})
}

func TestStatus(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	h.daemon.bad = "gone"
	st, err := h.c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.GPU != (Health{OK: true}) || st.Daemon != (Health{Reason: "gone"}) || len(st.Leases) != 0 || len(st.Services) != 1 {
		t.Fatalf("status %+v", st)
	}
	if st.Services[0].PredictedP99MS != st.Services[0].SoloP99MS {
		t.Errorf("with no lease, predicted %v ≠ solo %v", st.Services[0].PredictedP99MS, st.Services[0].SoloP99MS)
	}
	h.daemon.bad = ""
	d := mustDecide(t, h, request("r1"), Throttle)
	st, _ = h.c.Status(context.Background())
	if len(st.Leases) != 1 || st.Leases[0].TokenHash != ([32]byte{}) || st.Services[0] != d.Predictions[0] {
		t.Errorf("status %+v, decision %+v", st, d.Predictions)
	}
}

// TestWarmDecisionRunsNoSimulation: deciding the same request against the
// same leases again takes every prediction from the cache.
func TestWarmDecisionRunsNoSimulation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	if _, err := h.c.Quote(context.Background(), request("r1")); err != nil {
		t.Fatal(err)
	}
	cold := h.model.Stats()
	if cold.Misses < 3 {
		t.Fatalf("a throttle search ran %d simulations", cold.Misses)
	}
	if _, err := h.c.Quote(context.Background(), request("r2")); err != nil {
		t.Fatal(err)
	}
	if warm := h.model.Stats(); warm.Misses != cold.Misses || warm.Hits != cold.Hits+cold.Misses {
		t.Errorf("cold %+v, warm %+v", cold, warm)
	}
}

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
	tight := sloJustFitting(resnetP99(t, 100, 50)) // the second job fits at 50 %, just
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
		evs, err = h.c.UpdateServices(ctx, withSLO(h, sloJustFitting(resnetP99(t, 100, 60))), 0.1)
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
