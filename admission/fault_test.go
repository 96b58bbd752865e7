package admission

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeFaults is a GPU whose fault a test sets.
type fakeFaults struct {
	mu  sync.Mutex
	why string
}

func (f *fakeFaults) Fault() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.why != "", f.why
}

func (f *fakeFaults) set(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.why = why
}

// A GPU fault revokes every lease at once and evicts each job's
// processes; a guard round after it changes nothing more.
func TestFaultRevokesEveryLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h, a, b := twoLeases(t)
		ev, faults := &fakeEvictor{}, &fakeFaults{}
		h.c.deps.Evictor, h.c.deps.Faults = ev, faults
		for i, d := range []Decision{a, b} {
			if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{100 + i}); err != nil {
				t.Fatal(err)
			}
		}
		if evs, err := h.c.Guard(ctx); err != nil || len(evs) != 0 {
			t.Fatalf("guard on a healthy GPU: %+v, %v", evs, err)
		}
		stop := runController(t, h.c)
		defer stop()
		faults.set("XID 79: GPU has fallen off the bus")
		h.dev.mu.Lock()
		h.dev.bad = "XID 79: GPU has fallen off the bus"
		h.dev.mu.Unlock()
		evs, err := h.c.Guard(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 {
			t.Fatalf("events %+v, want both leases revoked", evs)
		}
		for _, e := range evs {
			if e.Type != EventRevoke || !e.Deadline.Equal(time.Now()) || !strings.Contains(e.Reason, "XID 79") {
				t.Errorf("event %+v, want a revoke due now naming the fault", e)
			}
		}
		synctest.Wait()
		got := ev.pids()
		if len(got) != 2 {
			t.Fatalf("evicted %v, want each job's process", got)
		}
		if len(h.c.Leases()) != 0 {
			t.Errorf("leases %+v after the fault", h.c.Leases())
		}
		if evs, err := h.c.Guard(ctx); err != nil || len(evs) != 0 {
			t.Errorf("a second guard round: %+v, %v; want nothing", evs, err)
		}
		// Until the GPU is healthy, nothing is admitted.
		if _, err := h.c.Decide(ctx, request("third")); !errors.Is(err, ErrUnavailable) {
			t.Errorf("decide during the fault: %v, want ErrUnavailable", err)
		}
		types := map[EventType]int{}
		for _, e := range h.events.all() {
			types[e.Type]++
		}
		if diff := cmp.Diff(map[EventType]int{EventRevoke: 2, EventExpire: 2}, types); diff != "" {
			t.Errorf("published events (-want +got):\n%s", diff)
		}
	})
}
