package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
	"github.com/google/go-cmp/cmp"
)

// fakeEvictor records what it was asked to evict; fail makes the next
// calls fail.
type fakeEvictor struct {
	mu    sync.Mutex
	calls [][]Process
	fail  int
}

func (f *fakeEvictor) Evict(_ context.Context, procs []Process) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, append([]Process(nil), procs...))
	if f.fail > 0 {
		f.fail--
		return errors.New("terminate_client: daemon not responding")
	}
	return nil
}

func (f *fakeEvictor) pids() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]int
	for _, c := range f.calls {
		var ps []int
		for _, p := range c {
			ps = append(ps, p.PID)
		}
		out = append(out, ps)
	}
	return out
}

// fakeClock is a host whose processes started at the given times.
type fakeClock map[int]time.Time

func (f fakeClock) StartTime(pid int) (time.Time, uint64, error) {
	t, ok := f[pid]
	if !ok {
		return time.Time{}, 0, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	return t, uint64(t.UnixNano()), nil
}

// fakeHost is a fakeClock whose processes also have a COLOCD_LEASE_ID.
type fakeHost struct {
	fakeClock
	lease map[int]string
}

func (f fakeHost) LeaseOf(pid int) (string, error) {
	if _, ok := f.fakeClock[pid]; !ok {
		return "", fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	return f.lease[pid], nil
}

// throttled grants two leases, registers pids for each (the first's
// 100, 101; the second's 200, 201), and tightens the SLO so that the
// second is throttled to 50 %. It runs the expiry loop.
func throttled(t *testing.T, ev *fakeEvictor) (*harness, Decision, Decision, func()) {
	t.Helper()
	slo := sloJustFitting(resnetP99(t, 100, 50))
	h, a, b := twoLeases(t)
	h.c.deps.Evictor = ev
	ctx := context.Background()
	for _, r := range []struct {
		d    Decision
		pids []int
	}{{a, []int{100, 101}}, {b, []int{200, 201}}} {
		if err := h.c.Register(ctx, r.d.Lease.ID, tokenOf(r.d), r.pids); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	evs, err := h.c.UpdateServices(ctx, withSLO(h, slo), 0.1)
	if err != nil || len(evs) != 1 || evs[0].Type != EventThrottle || evs[0].LeaseID != b.Lease.ID {
		t.Fatalf("events %+v, %v; want the second lease throttled", evs, err)
	}
	h.events.ch = make(chan Event, 4)
	return h, a, b, runController(t, h.c)
}

// throttledRecorded is throttled with an evictor that records what it is
// asked to evict, its expiry loop running until the test ends.
func throttledRecorded(t *testing.T) (*harness, Decision, Decision, *fakeEvictor) {
	t.Helper()
	ev := &fakeEvictor{}
	h, a, b, stop := throttled(t, ev)
	t.Cleanup(stop)
	return h, a, b, ev
}

func TestThrottleNotHonouredIsRevokedAndEvicted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, a, b, ev := throttledRecorded(t)
		time.Sleep(DefaultThrottleGrace - time.Second)
		synctest.Wait()
		if len(ev.pids()) != 0 {
			t.Fatalf("evicted %v before the deadline", ev.pids())
		}
		time.Sleep(time.Second)
		revoke, expire := nextEvent(t, h.events.ch), nextEvent(t, h.events.ch)
		if revoke.Type != EventRevoke || revoke.LeaseID != b.Lease.ID || !strings.Contains(revoke.Reason, "did not register") {
			t.Errorf("first event %+v, want the revoke of the throttled lease", revoke)
		}
		if expire.Type != EventExpire || expire.LeaseID != b.Lease.ID {
			t.Errorf("second event %+v, want its expire", expire)
		}
		if diff := cmp.Diff([][]int{{200, 201}}, ev.pids()); diff != "" {
			t.Errorf("evicted (-want +got):\n%s", diff)
		}
		if ls := h.c.Leases(); len(ls) != 1 || ls[0].ID != a.Lease.ID {
			t.Errorf("leases %+v, want only the first", ls)
		}
		if ls, _ := h.store.Load(context.Background()); len(ls) != 1 {
			t.Errorf("%d leases stored, want the first only", len(ls))
		}
	})
}

func TestThrottleHonouredEvictsOnlyTheReplacedProcesses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, _, b, ev := throttledRecorded(t)
		time.Sleep(time.Second)
		// The launcher restarted one worker (201 went on): 200 is replaced.
		if err := h.c.Register(context.Background(), b.Lease.ID, tokenOf(b), []int{201, 300}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultThrottleGrace)
		synctest.Wait()
		if diff := cmp.Diff([][]int{{200}}, ev.pids()); diff != "" {
			t.Errorf("evicted (-want +got):\n%s", diff)
		}
		if evs := h.events.all(); len(evs) != 1 {
			t.Errorf("events %+v, want only the throttle", evs)
		}
		s := stored(t, h.store, b.Lease.ID)
		if len(s.Retired) != 0 || s.Revoked || s.Pct != 50 {
			t.Errorf("stored %+v, want it at 50 %% with nothing left to evict", s)
		}
	})
}

func TestExpiredLeaseIsEvictedBeforeItsCapacityIsFreed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, predictor.ModeMPS, 100, nil)
		ev := &fakeEvictor{fail: 1}
		h.c.deps.Evictor = ev
		r := request("gone")
		r.LeaseSeconds = 60
		d := mustDecide(t, h, r, Grant)
		if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{4242}); err != nil {
			t.Fatal(err)
		}
		h.events.ch = make(chan Event, 4)
		stop := runController(t, h.c)
		defer stop()
		// The launcher vanished: the lease expires, the first eviction fails.
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if got := len(ev.pids()); got != 1 {
			t.Fatalf("%d evictions, want 1", got)
		}
		ls := h.c.Leases()
		if len(ls) != 1 || !ls[0].Revoked {
			t.Fatalf("leases %+v, want the lease kept, revoked, while its process runs", ls)
		}
		if _, err := h.c.Renew(ctx, d.Lease.ID, tokenOf(d)); !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrConflict) {
			t.Errorf("renew of a lease being evicted: %v", err)
		}
		time.Sleep(evictRetry)
		if e := nextEvent(t, h.events.ch); e.Type != EventExpire || e.LeaseID != d.Lease.ID {
			t.Errorf("event %+v, want its expire", e)
		}
		if diff := cmp.Diff([][]int{{4242}, {4242}}, ev.pids()); diff != "" {
			t.Errorf("evicted (-want +got):\n%s", diff)
		}
		if len(h.c.Leases()) != 0 {
			t.Error("the lease is still held after its process was evicted")
		}
	})
}

func TestRegisterRefusesProcessesThatAreNotTheJobs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, predictor.ModeMPS, 100, nil)
		granted := time.Now()
		h.c.deps.Processes = fakeClock{
			1:   granted.Add(-time.Hour),        // the inference server: ran before the grant
			50:  granted.Add(-time.Second / 2),  // within /proc's precision of the grant
			60:  granted.Add(5 * time.Second),   // a worker of the first job
			70:  granted.Add(5 * time.Second),   // a worker of the second job
			400: granted.Add(-10 * time.Second), // before the grant
		}
		a, b := grantTwo(t, h)
		time.Sleep(5 * time.Second)
		if err := h.c.Register(ctx, a.Lease.ID, tokenOf(a), []int{60, 50}); err != nil {
			t.Fatalf("register the job's own processes: %v", err)
		}
		tests := []struct {
			name string
			pids []int
			want string
		}{
			{name: "the inference server", pids: []int{70, 1}, want: "pids[1]: want a process started after"},
			{name: "an older process", pids: []int{400}, want: "pids[0]: want a process started after"},
			{name: "no such process", pids: []int{999}, want: "pids[0]: want a running process"},
			{name: "another lease's process", pids: []int{70, 60}, want: "pids[1]: want a process id no other lease holds"},
		}
		for _, tt := range tests { // no t.Run in a bubble
			err := h.c.Register(ctx, b.Lease.ID, tokenOf(b), tt.pids)
			wantInvalid(t, tt.name, err, tt.want)
			if s := stored(t, h.store, b.Lease.ID); len(s.PIDs) != 0 {
				t.Errorf("%s: stored pids %v after a refused register", tt.name, s.PIDs)
			}
		}
		// The second job's own worker is accepted, with its start time.
		if err := h.c.Register(ctx, b.Lease.ID, tokenOf(b), []int{70}); err != nil {
			t.Fatal(err)
		}
		s := stored(t, h.store, b.Lease.ID)
		if want := []time.Time{granted.Add(5 * time.Second)}; !cmp.Equal(s.Starts, want) {
			t.Errorf("stored start times %v, want %v", s.Starts, want)
		}
	})
}

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
	h, _, b, _ := throttledRecorded(t)
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
		if diff := cmp.Diff([][]int{{200, 201}}, ev.pids()); diff != "" {
			t.Errorf("evicted (-want +got), want the replaced 200 and 201 once:\n%s", diff)
		}
	})
}

// A launcher cannot release a throttled lease to keep its workers: they
// are evicted, then the lease is gone.
func TestReleaseEvictsWhatStillRuns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, _, b, ev := throttledRecorded(t)
		if err := h.c.Release(context.Background(), b.Lease.ID, tokenOf(b)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if diff := cmp.Diff([][]int{{200, 201}}, ev.pids()); diff != "" {
			t.Errorf("evicted (-want +got), want the released lease's 200 and 201:\n%s", diff)
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
		h, _, b, ev := throttledRecorded(t)
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
		if got := ev.pids(); len(got) == 0 || !cmp.Equal(got[0], []int{200, 201}) {
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
		if s := stored(t, h.store, b.Lease.ID); !cmp.Equal(s.PIDs, []int{101}) {
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
		if !wantInvalid(t, "hostile register", err, "COLOCD_LEASE_ID") {
			t.FailNow()
		}
		if err := h.c.Register(ctx, victim.Lease.ID, tokenOf(victim), []int{5000}); err != nil {
			t.Fatalf("the victim's own register: %v", err)
		}
	})
}
