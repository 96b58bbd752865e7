package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

func TestThrottleNotHonouredIsRevokedAndEvicted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ev := &fakeEvictor{}
		h, a, b, stop := throttled(t, ev)
		defer stop()
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
		ev := &fakeEvictor{}
		h, _, b, stop := throttled(t, ev)
		defer stop()
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
		a := mustDecide(t, h, request("first"), Grant)
		b := mustDecide(t, h, request("second"), Grant)
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
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: err = %v, want ErrInvalid with %q", tt.name, err, tt.want)
			}
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
