package admission

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
	"github.com/google/go-cmp/cmp"
)

func TestIdempotentRetry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testIdempotentRetry)
}

func testIdempotentRetry(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	req := request("r1")
	req.LeaseSeconds = 3600
	first := mustDecide(t, h, req, Throttle)
	again := mustDecide(t, h, req, Throttle)
	if diff := cmp.Diff(first, again); diff != "" || again.Lease == nil {
		t.Fatalf("the retry's decision differs from the first (-first +retry):\n%s", diff)
	}
	if n := len(h.c.Leases()); n != 1 {
		t.Fatalf("%d leases after a retry, want 1", n)
	}
	// The caller cannot change the remembered decision.
	again.Lease.Pct, again.Env["X"] = 1, "y"
	if d := mustDecide(t, h, req, Throttle); d.Lease.Pct != first.Lease.Pct || len(d.Env) != len(first.Env) {
		t.Error("a returned decision changed the remembered one")
	}

	changed := req
	changed.MaxPct = 90
	if _, err := h.c.Decide(ctx, changed); !errors.Is(err, ErrRequestIDReused) || !errors.Is(err, ErrConflict) {
		t.Fatalf("same id, other content: got %v, want ErrRequestIDReused (a conflict)", err)
	}
	// Someone who learnt the request_id and replays it with a token of
	// their own gets no lease: it is another request under a used id.
	replay := req
	replay.TokenHash = sha256.Sum256([]byte("the replayer's token"))
	if _, err := h.c.Decide(ctx, replay); !errors.Is(err, ErrRequestIDReused) {
		t.Fatalf("a replay with another token: got %v, want ErrRequestIDReused", err)
	}
	// And no copy of the request_id is kept, only its hash.
	for _, l := range h.c.Leases() {
		if l.RequestHash != sha256.Sum256([]byte(req.RequestID)) {
			t.Errorf("lease %s keeps request hash %x", l.ID, l.RequestHash)
		}
	}

	// A deny is remembered too.
	deny := request("r2")
	deny.MinPct = 90
	d1 := mustDecide(t, h, deny, Deny)
	if diff := cmp.Diff(d1, mustDecide(t, h, deny, Deny)); diff != "" {
		t.Errorf("a retried deny differs (-first +retry):\n%s", diff)
	}

	// Once forgotten, a request_id that still holds a live lease is a conflict,
	// not a second lease.
	time.Sleep(DefaultIdempotencyTTL + time.Second)
	if _, err := h.c.Decide(ctx, req); !errors.Is(err, ErrConflict) {
		t.Fatalf("forgotten id with a live lease: got %v, want ErrConflict", err)
	}
	if n := len(h.c.Leases()); n != 1 {
		t.Fatalf("%d leases, want 1", n)
	}
}

func TestIdempotencyIsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.IdempotencyMax = 3 })
	for i := range 10 {
		r := request(fmt.Sprint("d", i))
		r.MinPct = 1 // deny: memory
		h.dev.free = 0
		mustDecide(t, h, r, Deny)
	}
	if n := len(h.c.idem.byID); n != 3 {
		t.Fatalf("remembers %d decisions, want 3", n)
	}
	// The order of ids is bounded too: the forgotten front is dropped.
	if m := h.c.idem; len(m.order)-m.head != 3 || len(m.order) > 2*3+1 {
		t.Errorf("order holds %d ids from %d, want the 3 newest in at most 7", len(m.order), m.head)
	}
	for _, id := range h.c.idem.order[h.c.idem.head:] {
		if h.c.idem.byID[id] == nil {
			t.Errorf("an id in order is not remembered")
		}
	}
}

// TestConcurrentDecideTakesCapacityOnce: 50 racing requests for capacity 3
// (by max_jobs, then by memory) create exactly 3 leases.
func TestConcurrentDecideTakesCapacityOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(h *harness)
		code ReasonCode
	}{
		{"max_jobs 3", func(h *harness) { h.c.cfg.MaxJobs = 3 }, CodeMaxJobs},
		{"memory for 3", func(h *harness) { h.c.cfg.MaxJobs = 10; h.dev.free = 2048 + 3*4096 + 100 }, CodeInsufficientMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, predictor.ModeMPS, 100, nil)
			tt.edit(h)
			var wg sync.WaitGroup
			decisions := make([]Decision, 50)
			errs := make([]error, 50)
			for i := range 50 {
				wg.Go(func() { decisions[i], errs[i] = h.c.Decide(context.Background(), request(fmt.Sprint("r", i))) })
			}
			wg.Wait()
			grants := 0
			for i, d := range decisions {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				switch {
				case d.Outcome == Grant:
					grants++
				case d.Code != tt.code:
					t.Errorf("deny for %s: %s", d.Code, d.Message)
				}
			}
			stored, _ := h.store.Load(context.Background())
			if grants != 3 || len(h.c.Leases()) != 3 || len(stored) != 3 {
				t.Fatalf("%d grants, %d leases, %d stored; want 3", grants, len(h.c.Leases()), len(stored))
			}
		})
	}
}

// stored returns the store's copy of lease id.
func stored(t *testing.T, s *MemStore, id string) Lease {
	t.Helper()
	ls, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.ID == id {
			return *l
		}
	}
	t.Fatalf("lease %s not stored", id)
	return Lease{}
}

func TestLeaseOperations(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testLeaseOperations)
}

func testLeaseOperations(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.Lease.Max = 15 * time.Minute })
	d := mustDecide(t, h, request("r1"), Grant)
	id, tok := d.Lease.ID, tokenOf(d)
	if id == "" || d.Lease.TokenHash != ([32]byte{}) {
		t.Fatalf("lease %q token %q (hash handed out: %v)", id, tok, d.Lease.TokenHash != [32]byte{})
	}
	if s := stored(t, h.store, id); s.TokenHash == ([32]byte{}) {
		t.Fatal("the store has no token hash")
	}
	before := stored(t, h.store, id)

	// Wrong token: refused, and nothing changes.
	n := len(tok) - 1
	wrong := tok[:n] + "x"
	if tok[n] == 'x' {
		wrong = tok[:n] + "y"
	}
	if _, err := h.c.Renew(ctx, id, wrong); !errors.Is(err, ErrForbidden) {
		t.Errorf("renew with a wrong token: %v", err)
	}
	if err := h.c.Register(ctx, id, wrong, []int{100}); !errors.Is(err, ErrForbidden) {
		t.Errorf("register with a wrong token: %v", err)
	}
	if err := h.c.Release(ctx, id, wrong); !errors.Is(err, ErrForbidden) {
		t.Errorf("release with a wrong token: %v", err)
	}
	if err := h.c.Release(ctx, id, ""); !errors.Is(err, ErrForbidden) {
		t.Errorf("release with no token: %v", err)
	}
	if diff := cmp.Diff(before, stored(t, h.store, id)); diff != "" {
		t.Errorf("a refused call changed the stored lease (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff([]Lease{*d.Lease}, h.c.Leases()); diff != "" {
		t.Errorf("a refused call changed the live lease (-granted +live):\n%s", diff)
	}

	// Unknown lease.
	if _, err := h.c.Renew(ctx, "nope", tok); !errors.Is(err, ErrNotFound) {
		t.Errorf("renew of an unknown lease: %v", err)
	}

	// Renew: the lease's own duration from now, capped at max.
	time.Sleep(5 * time.Minute)
	l, err := h.c.Renew(ctx, id, tok)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Now().Add(10 * time.Minute); !l.ExpiresAt.Equal(want) || l.Revision <= before.Revision {
		t.Errorf("renewed to %s (revision %d), want %s", l.ExpiresAt, l.Revision, want)
	}
	h.c.cfg.Lease.Max = 7 * time.Minute
	if l, _ = h.c.Renew(ctx, id, tok); !l.ExpiresAt.Equal(time.Now().Add(7 * time.Minute)) {
		t.Errorf("renew past max: expires %s", l.ExpiresAt)
	}

	// Register: validated, replaces the PIDs.
	for _, bad := range [][]int{nil, {0}, {MaxPID + 1}, {-1}, {5, 5}, make([]int, 49), {1, 2, 3}} { // the request said 2 processes
		if err := h.c.Register(ctx, id, tok, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("register %v: %v", bad, err)
		}
	}
	for _, pids := range [][]int{{1}, {4242, 4243}} {
		if err := h.c.Register(ctx, id, tok, pids); err != nil {
			t.Fatal(err)
		}
	}
	if s := stored(t, h.store, id); fmt.Sprint(s.PIDs) != "[4242 4243]" {
		t.Errorf("stored pids %v", s.PIDs)
	}
	mustDecide(t, h, request("r3"), Grant)

	// Release frees the lease.
	if err := h.c.Release(ctx, id, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Renew(ctx, id, tok); !errors.Is(err, ErrNotFound) {
		t.Errorf("renew after release: %v", err)
	}
	if n := len(h.c.Leases()); n != 1 {
		t.Errorf("%d leases after release, want 1", n)
	}
	if len(h.events.all()) != 0 {
		t.Errorf("events %v, want none", h.events.all())
	}
}

// TestNotYetVisible: a lease's memory counts against NVML's free figure for
// VisibilityWindow after its grant, unless it registered PIDs.
func TestNotYetVisible(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		visible func(t *testing.T, h *harness, d Decision)
	}{
		{"the window passes", func(t *testing.T, h *harness, _ Decision) { time.Sleep(time.Second) }},
		{"PIDs registered", func(t *testing.T, h *harness, d Decision) {
			if err := h.c.Register(context.Background(), d.Lease.ID, tokenOf(d), []int{4242}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, predictor.ModeMPS, 100, nil)
				d := mustDecide(t, h, request("r1"), Grant)
				h.dev.free = 2048 + 4096 // room for one job, if r1's memory is in NVML's figure
				mustDecide(t, h, request("r2"), Deny)
				time.Sleep(DefaultVisibilityWindow - time.Second)
				mustDecide(t, h, request("r3"), Deny)
				tt.visible(t, h, d)
				mustDecide(t, h, request("r4"), Grant)
			})
		})
	}
}

func TestStoreConflictChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	d := mustDecide(t, h, request("r1"), Grant)
	// Someone else writes the lease behind the controller's back.
	s := stored(t, h.store, d.Lease.ID)
	if err := h.store.Save(ctx, &s); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Renew(ctx, d.Lease.ID, tokenOf(d)); !errors.Is(err, ErrConflict) {
		t.Fatalf("renew on a moved revision: %v", err)
	}
	if got := h.c.Leases()[0]; !got.ExpiresAt.Equal(d.Lease.ExpiresAt) {
		t.Error("a failed renew changed the lease")
	}
}

// A grant binds the token hash the launcher sent; without one there is
// nothing to bind, so Decide refuses, while a quote needs none.
func TestDecideNeedsATokenHash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	req := request("r1")
	req.TokenHash = [32]byte{}
	_, err := h.c.Decide(ctx, req)
	wantInvalid(t, "Decide without a token hash", err, "token_sha256")
	if d, err := h.c.Quote(ctx, req); err != nil || d.Outcome != Grant {
		t.Errorf("Quote without a token hash: %+v, %v", d, err)
	}
	if n := len(h.c.Leases()); n != 0 {
		t.Errorf("%d leases, want 0", n)
	}
}

// listingDevice is a GPU that lists its compute processes.
type listingDevice struct {
	*fakeDevice
	pids []int
	err  error
}

func (d *listingDevice) ComputePIDs(context.Context) ([]int, error) { return d.pids, d.err }

// TestRegisterChecksGPUProcesses: on a GPU that lists its processes, only
// PIDs that run on it can be registered (and so become eviction targets);
// a wrong token learns nothing about them; a failed read is a 503.
func TestRegisterChecksGPUProcesses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 1e6, nil)
	dev := &listingDevice{fakeDevice: h.dev, pids: []int{4242, 4243, 777}}
	c, err := New(h.c.cfg, Deps{Device: dev, Daemon: h.daemon, Store: h.store, Events: h.events, Predictor: h.model})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := c.Decide(ctx, request("gpu-pids"))
	if err != nil || d.Lease == nil {
		t.Fatalf("decide: %+v, %v", d, err)
	}
	id, tok := d.Lease.ID, tokenOf(d)
	if err := c.Register(ctx, id, tok, []int{4242, 4243}); err != nil {
		t.Fatalf("register processes on the GPU: %v", err)
	}
	err = c.Register(ctx, id, tok, []int{4242, 1})
	wantInvalid(t, "register a process not on the GPU", err, "pids[1]", "on this GPU")
	if err := c.Register(ctx, id, "wrong-token", []int{1}); !errors.Is(err, ErrForbidden) {
		t.Errorf("wrong token with a pid not on the GPU: %v, want 403 before any pid check", err)
	}
	dev.err = errors.New("nvml: gpu is lost")
	if err := c.Register(ctx, id, tok, []int{4242}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("register while the GPU's processes cannot be read: %v", err)
	}
	got := c.Leases()
	if len(got) != 1 || fmt.Sprint(got[0].PIDs) != "[4242 4243]" {
		t.Errorf("leases %+v: the refused registers changed nothing", got)
	}
}

// A register of far more PIDs than a job may have (a hostile launcher's
// 125,000) is refused for its count alone: an error of one line, naming
// the field, whatever the list holds.
func TestRegisterHugeListRefusedByCount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 1e6, nil)
	ctx := context.Background()
	d, err := h.c.Decide(ctx, request("gpu-huge"))
	if err != nil || d.Lease == nil {
		t.Fatalf("decide: %+v, %v", d, err)
	}
	pids := make([]int, 125_000)
	for i := range pids {
		pids[i] = 1 + i%7 // repeats and all: not looked at
	}
	err = h.c.Register(ctx, d.Lease.ID, tokenOf(d), pids)
	if wantInvalid(t, fmt.Sprint("register of ", len(pids), " pids"), err, "pids") && len(err.Error()) > 200 {
		t.Errorf("register of %d pids: %v (%d bytes), want a short error", len(pids), err, len(err.Error()))
	}
	// Repeats in a list of allowed length are found, each once.
	err = h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{5, 6, 5, 6})
	wantInvalid(t, "register with repeats", err, "pids[2]", "pids[3]")
}
