package admission

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// These tests pin the holes a review found in enforcement: each failed
// before its fix.

// countingEvictor always fails and counts its calls.
type countingEvictor struct{ n atomic.Int64 }

func (e *countingEvictor) Evict(context.Context, []Process) error {
	e.n.Add(1)
	return context.DeadlineExceeded
}

// flakyStore fails Save while fail is set.
type flakyStore struct {
	*MemStore
	fail atomic.Bool
}

func (s *flakyStore) Save(ctx context.Context, l *Lease) error {
	if s.fail.Load() {
		return context.DeadlineExceeded
	}
	return s.MemStore.Save(ctx, l)
}

// restarted is throttled with the second lease's workers restarted: 200
// and 201 replaced by 300, due at the throttle's deadline.
func restarted(t *testing.T, ev Evictor) (*harness, Decision) {
	t.Helper()
	h, _, b, stop := throttled(t, &fakeEvictor{})
	t.Cleanup(stop)
	time.Sleep(time.Second)
	if err := h.c.Register(context.Background(), b.Lease.ID, tokenOf(b), []int{300}); err != nil {
		t.Fatal(err)
	}
	h.c.mu.Lock() // the expiry loop runs
	h.c.deps.Evictor = ev
	h.c.mu.Unlock()
	return h, b
}

// A replaced process that cannot be evicted (the daemon times out) is
// tried again every evictRetry, not in a loop without pause.
func TestRetiredEvictionFailureBacksOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &countingEvictor{}
		restarted(t, ev)
		time.Sleep(DefaultThrottleGrace + 30*time.Second)
		synctest.Wait()
		if n := ev.n.Load(); n < 2 || n > 8 {
			t.Errorf("%d eviction attempts in the 30 s after the deadline, want one every %s", n, evictRetry)
		}
	})
}

// A replaced process evicted while the store is down is not evicted again
// and again.
func TestRetiredEvictionWithTheStoreDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &fakeEvictor{}
		h, _ := restarted(t, ev)
		fs := &flakyStore{MemStore: h.store}
		fs.fail.Store(true)
		h.c.mu.Lock()
		h.c.deps.Store = fs
		h.c.mu.Unlock()
		time.Sleep(DefaultThrottleGrace + 30*time.Second)
		synctest.Wait()
		if got := ev.pids(); len(got) != 1 || !slices.Equal(got[0], []int{200, 201}) {
			t.Errorf("evicted %v, want the replaced 200 and 201 once", got)
		}
	})
}

// A launcher cannot release a throttled lease to keep its workers: they
// are evicted, then the lease is gone.
func TestReleaseEvictsWhatStillRuns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &fakeEvictor{}
		h, _, b, stop := throttled(t, ev)
		defer stop()
		if err := h.c.Release(context.Background(), b.Lease.ID, tokenOf(b)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := ev.pids(); len(got) != 1 || !slices.Equal(got[0], []int{200, 201}) {
			t.Errorf("evicted %v, want the released lease's 200 and 201", got)
		}
		if ls := h.c.Leases(); len(ls) != 1 || ls[0].ID == b.Lease.ID {
			t.Errorf("leases %+v, want the released one gone", ls)
		}
		if e := nextEvent(t, h.events.ch); e.Type != EventExpire || !strings.Contains(e.Reason, "released") {
			t.Errorf("event %+v, want its expire", e)
		}
	})
}

// secondRevoked grants two jobs that accept only 100 %, registers a
// worker for each (100, 101), and tightens the SLO so that only one fits:
// the second is revoked, due in ThrottleGrace. Call it in a bubble.
func secondRevoked(t *testing.T, deps func(*Deps)) (*harness, Decision, Decision) {
	t.Helper()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	if deps != nil {
		deps(&h.c.deps)
	}
	ra, rb := request("first"), request("second")
	ra.MinPct, rb.MinPct, ra.LeaseSeconds, rb.LeaseSeconds = 100, 100, 3600, 3600
	a := mustDecide(t, h, ra, Grant)
	time.Sleep(time.Second)
	b := mustDecide(t, h, rb, Grant)
	for i, d := range []Decision{a, b} {
		if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{100 + i}); err != nil {
			t.Fatal(err)
		}
	}
	if evs, err := h.c.UpdateServices(ctx, withSLO(h, sloJustFitting(resnetP99(t, 100))), 0.1); err != nil || len(evs) != 1 || evs[0].Type != EventRevoke || evs[0].LeaseID != b.Lease.ID {
		t.Fatalf("%+v %v; want the second revoked", evs, err)
	}
	return h, a, b
}

// A fault brings an earlier revoke's deadline forward to now.
func TestFaultEndsARevokedLeaseNow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev, faults := &fakeEvictor{}, &fakeFaults{}
		h, _, _ := secondRevoked(t, func(d *Deps) { d.Evictor, d.Faults = ev, faults })
		stop := runController(t, h.c)
		defer stop()
		faults.set("XID 79")
		if _, err := h.c.Guard(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := ev.pids(); len(got) != 2 {
			t.Errorf("evicted %v right after the fault, want both leases' processes", got)
		}
	})
}

// Between a throttle and the restart, the workers run at the old
// percentage: a window then is not measured against the new one (an exact
// model would get a correction).
func TestNoMeasurementWhileAWorkerAwaitsItsRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tight := sloJustFitting(resnetP99(t, 100, 50))
	exact := resnetP99(t, 100, 100) // what the model predicts for the workers as they still run
	synctest.Test(t, func(t *testing.T) {
		h, a, b := twoLeases(t)
		for i, d := range []Decision{a, b} {
			if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{100 + i}); err != nil {
				t.Fatal(err)
			}
		}
		obs := &fakeLatency{}
		h.c.deps.Observer = obs
		time.Sleep(time.Second)
		if evs, err := h.c.UpdateServices(ctx, withSLO(h, tight), 0.1); err != nil || len(evs) != 1 || evs[0].Pct != 50 {
			t.Fatalf("%+v %v", evs, err)
		}
		start := time.Now()
		time.Sleep(30 * time.Second)
		obs.set(exact, start)
		evs, err := h.c.Guard(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c := h.c.Corrections(); len(c) != 0 || len(evs) != 0 {
			t.Errorf("corrections %v, events %+v: an exact model was corrected", c, evs)
		}
	})
}

// A second throttle does not postpone the eviction of the processes the
// first restart replaced.
func TestSecondThrottleKeepsTheReplacedProcessesDue(t *testing.T) {
	t.Parallel()
	slo40 := sloJustFitting(resnetP99(t, 100, 40))
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ev := &fakeEvictor{}
		h, _, b, stop := throttled(t, ev)
		defer stop()
		first := time.Now()
		time.Sleep(time.Second)
		if err := h.c.Register(ctx, b.Lease.ID, tokenOf(b), []int{300}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(90 * time.Second)
		if evs, err := h.c.UpdateServices(ctx, withSLO(h, slo40), 0.1); err != nil || len(evs) != 1 {
			t.Fatalf("%+v %v", evs, err)
		}
		time.Sleep(time.Until(first.Add(DefaultThrottleGrace + time.Second)))
		synctest.Wait()
		if got := ev.pids(); len(got) == 0 || !slices.Equal(got[0], []int{200, 201}) {
			t.Errorf("evicted %v at the first deadline, want the replaced 200 and 201", got)
		}
	})
}

// A revoked lease cannot register decoys in place of its workers.
func TestRegisterRefusedOnARevokedLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, _, b := secondRevoked(t, nil)
		if err := h.c.Register(context.Background(), b.Lease.ID, tokenOf(b), []int{999}); !errors.Is(err, ErrConflict) {
			t.Fatalf("register on a revoked lease: %v, want ErrConflict", err)
		}
		if s := stored(t, h.store, b.Lease.ID); !slices.Equal(s.PIDs, []int{101}) {
			t.Errorf("stored pids %v, want the worker 101 kept for eviction", s.PIDs)
		}
	})
}

// With the processes' environments, the holder of an older lease cannot
// register a newer job's worker (and have colocd evict it); the newer
// job's own register of it works.
func TestNoLeaseCanRegisterAnotherJobsWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, predictor.ModeMPS, 100, nil)
		host := fakeHost{fakeClock: fakeClock{}, lease: map[int]string{}}
		h.c.deps.Processes = host
		x := mustDecide(t, h, request("hostile"), Grant)
		time.Sleep(time.Second)
		victim := mustDecide(t, h, request("victim"), Grant)
		time.Sleep(time.Second)
		host.fakeClock[5000], host.lease[5000] = time.Now(), victim.Lease.ID // the victim's worker, started with its env
		err := h.c.Register(ctx, x.Lease.ID, tokenOf(x), []int{5000})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "COLOCD_LEASE_ID") {
			t.Fatalf("hostile register: %v, want a refusal naming COLOCD_LEASE_ID", err)
		}
		if err := h.c.Register(ctx, victim.Lease.ID, tokenOf(victim), []int{5000}); err != nil {
			t.Fatalf("the victim's own register: %v", err)
		}
	})
}
