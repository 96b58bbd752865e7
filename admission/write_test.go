package admission

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// stallingStore is a MemStore whose writes of one lease wait until the
// test lets them go, as a store on a full disk or behind a lost server
// does for its timeout.
type stallingStore struct {
	*MemStore
	lease   string
	started chan struct{} // a write of lease began
	release chan struct{} // closed: writes of lease go on
}

func (s *stallingStore) stall(id string) {
	if id != s.lease {
		return
	}
	select {
	case <-s.release:
		return
	default:
	}
	s.started <- struct{}{}
	<-s.release
}

func (s *stallingStore) Save(ctx context.Context, l *Lease) error {
	s.stall(l.ID)
	return s.MemStore.Save(ctx, l)
}

func (s *stallingStore) Delete(ctx context.Context, l *Lease) error {
	s.stall(l.ID)
	return s.MemStore.Delete(ctx, l)
}

// done runs fn in a goroutine and returns a channel with its result.
func done(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

// finishes fails the test when ch has no result in a minute: what it waits
// for returns at once unless it is stuck behind the lock, a prediction or
// another lease's store write.
func finishes(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s is stuck: it waits for the lock, a prediction or a store write", what)
	}
}

// TestStoreWritesOutsideTheLock: while one lease's record is being written
// (and the store hangs), every call about other leases goes on; a change
// of that lease waits for the write and then applies on top of it.
func TestStoreWritesOutsideTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 1e6, nil)
	a, b := grantTwo(t, h)
	st := &stallingStore{MemStore: h.store, lease: a.Lease.ID, started: make(chan struct{}), release: make(chan struct{})}
	h.c.deps.Store = st

	renewA := done(func() error { _, err := h.c.Renew(ctx, a.Lease.ID, tokenOf(a)); return err })
	<-st.started // A's record is being written, and stalls

	finishes(t, "renew of another lease", done(func() error { _, err := h.c.Renew(ctx, b.Lease.ID, tokenOf(b)); return err }))
	finishes(t, "register of another lease", done(func() error { return h.c.Register(ctx, b.Lease.ID, tokenOf(b), []int{4242}) }))
	finishes(t, "a decision", done(func() error { _, err := h.c.Decide(ctx, request("c")); return err }))
	finishes(t, "status", done(func() error { _, err := h.c.Status(ctx); return err }))

	// A release of A waits for A's renew, then deletes the renewed record.
	releaseA := done(func() error { return h.c.Release(ctx, a.Lease.ID, tokenOf(a)) })
	close(st.release)
	finishes(t, "the stalled renew", renewA)
	finishes(t, "the release after it", releaseA)
	if _, err := h.c.Renew(ctx, a.Lease.ID, tokenOf(a)); !errors.Is(err, ErrNotFound) {
		t.Errorf("renew after release: %v", err)
	}
	if n := len(h.c.Leases()); n != 2 {
		t.Errorf("%d leases, want b and c", n)
	}
}

// TestGrantHoldsCapacityWhileStored: a grant's lease counts from the
// moment it commits, while its record is created without the lock; a
// store that refuses it gives the capacity back.
func TestGrantHoldsCapacityWhileStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 1e6, func(c *Config) { c.MaxJobs = 1 })
	h.c.deps.Store = failingStore{h.store}
	d, err := h.c.Decide(ctx, request("a"))
	if !errors.Is(err, ErrUnavailable) || d.Code != CodeStoreUnavailable {
		t.Fatalf("grant on a failing store: %+v, %v", d, err)
	}
	if n := len(h.c.Leases()); n != 0 {
		t.Fatalf("%d leases after a refused grant", n)
	}
	h.c.deps.Store = h.store
	mustDecide(t, h, request("b"), Grant) // the capacity came back
	if d := mustDecide(t, h, request("c"), Deny); d.Code != CodeMaxJobs {
		t.Errorf("deny %s, want max_jobs", d.Code)
	}
}

// TestLeaseCountsWhileItsRenewIsWritten: a renew whose write outlasts the
// lease's old expiry keeps the lease's capacity taken all along, so a job
// decided meanwhile cannot take it too; and a second call on the lease
// waits for the renew instead of finding the lease expired.
func TestLeaseCountsWhileItsRenewIsWritten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testLeaseCountsWhileItsRenewIsWritten)
}

func testLeaseCountsWhileItsRenewIsWritten(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 1e6, func(c *Config) { c.MaxJobs = 1 })
	a := mustDecide(t, h, request("a"), Grant)
	st := &stallingStore{MemStore: h.store, lease: a.Lease.ID, started: make(chan struct{}), release: make(chan struct{})}
	h.c.deps.Store = st

	time.Sleep(5 * time.Minute) // halfway through the lease's 10 minutes
	renew := done(func() error { _, err := h.c.Renew(ctx, a.Lease.ID, tokenOf(a)); return err })
	<-st.started
	time.Sleep(5*time.Minute + time.Second) // past the old expiry, before the renewed one
	if d := mustDecide(t, h, request("b"), Deny); d.Code != CodeMaxJobs {
		t.Errorf("a job decided while the renew is written: %s, want max_jobs", d.Code)
	}
	register := done(func() error { return h.c.Register(ctx, a.Lease.ID, tokenOf(a), []int{4242}) })
	close(st.release)
	finishes(t, "the renew", renew)
	finishes(t, "a register waiting for it", register)
	if n := len(h.c.Leases()); n != 1 {
		t.Errorf("%d leases, want the renewed one alone", n)
	}
}
