package admission

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/internal/runtest"
	"github.com/colocd/colocd/predictor"
	"github.com/google/go-cmp/cmp"
)

// runController starts Run and returns a function that stops it and checks
// it returned nil.
func runController(t *testing.T, c *Controller) func() {
	t.Helper()
	stop := runtest.Background(c.Run)
	return func() {
		if err := stop(); err != nil {
			t.Errorf("run: %v", err)
		}
	}
}

func nextEvent(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return Event{}
	}
}

// TestExpiry: Run expires a lease at its expiry, as a renew moved it, not
// a moment before, and its capacity is free again.
func TestExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.MaxJobs = 1 })
		h.events.ch = make(chan Event, 4)
		stop := runController(t, h.c)
		defer stop()

		req := request("r1")
		req.LeaseSeconds = 60
		d := mustDecide(t, h, req, Grant)
		mustDecide(t, h, request("r2"), Deny) // max_jobs 1

		// Renewed halfway: the expiry moves a minute on from now.
		time.Sleep(30 * time.Second)
		l, err := h.c.Renew(context.Background(), d.Lease.ID, tokenOf(d))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(59 * time.Second) // past the first expiry, a second before the renewed one
		synctest.Wait()
		select {
		case ev := <-h.events.ch:
			t.Fatalf("event before expiry: %+v", ev)
		default:
		}
		time.Sleep(time.Second)
		ev := nextEvent(t, h.events.ch)
		want := Event{Type: EventExpire, LeaseID: d.Lease.ID, JobID: "job-r1", Pct: 100,
			Reason: "the lease was not renewed before it expired", Time: l.ExpiresAt}
		if diff := cmp.Diff(want, ev); diff != "" {
			t.Errorf("expire event (-want +got):\n%s", diff)
		}
		if n := len(h.c.Leases()); n != 0 {
			t.Errorf("%d leases after expiry", n)
		}
		if s, _ := h.store.Load(context.Background()); len(s) != 0 {
			t.Errorf("%d stored leases after expiry", len(s))
		}
		mustDecide(t, h, request("r3"), Grant) // the capacity is free
		if _, err := h.c.Renew(context.Background(), d.Lease.ID, tokenOf(d)); !errors.Is(err, ErrNotFound) {
			t.Errorf("renew after expiry: %v", err)
		}
	})
}

// TestExpiredButNotYetCollected: a lease past its expiry no longer counts or
// renews even before Run removes it.
func TestExpiredButNotYetCollected(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.MaxJobs = 1 })
		req := request("r1")
		req.LeaseSeconds = 60
		d := mustDecide(t, h, req, Grant)
		time.Sleep(time.Minute)
		if _, err := h.c.Renew(context.Background(), d.Lease.ID, tokenOf(d)); !errors.Is(err, ErrNotFound) {
			t.Errorf("renew of an expired lease: %v", err)
		}
		mustDecide(t, h, request("r2"), Grant)
	})
}

func TestRestore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRestore)
}

func testRestore(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	short := request("short")
	short.LeaseSeconds = 60
	dShort := mustDecide(t, h, short, Throttle)
	time.Sleep(time.Second)
	long := request("long")
	long.LeaseSeconds = 3600
	long.MinPct = 5
	dLong := mustDecide(t, h, long, Throttle)
	before := h.c.Leases()

	// A new controller on the same store, two minutes later.
	time.Sleep(2 * time.Minute)
	h2 := newHarness(t, predictor.ModeMPS, 9, nil)
	h2.store = h.store
	h2.c.deps.Store = h.store
	if err := h2.c.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	got := h2.c.Leases()
	if len(got) != 1 || got[0].ID != dLong.Lease.ID || got[0].Pct != before[1].Pct || got[0].Revision != before[1].Revision {
		t.Fatalf("restored %+v, want the long lease %+v", got, before[1])
	}
	evs := h2.events.all()
	if len(evs) != 1 || evs[0].Type != EventExpire || evs[0].LeaseID != dShort.Lease.ID {
		t.Errorf("events %+v, want the short lease's expire", evs)
	}
	if s, _ := h.store.Load(ctx); len(s) != 1 {
		t.Errorf("%d stored, want 1", len(s))
	}
	// The token still works (its hash was stored); the request id still holds its lease.
	if _, err := h2.c.Renew(ctx, dLong.Lease.ID, tokenOf(dLong)); err != nil {
		t.Errorf("renew after restore: %v", err)
	}
	if _, err := h2.c.Decide(ctx, long); !errors.Is(err, ErrConflict) {
		t.Errorf("retry of a restored lease's request: %v, want ErrConflict", err)
	}
	// The restored lease is a trainer in the next prediction: the same job
	// at the same percentage is now predicted worse than it was alone.
	d, _ := h2.c.Quote(ctx, short)
	if d.Pct != dShort.Pct || !(d.Predictions[0].PredictedP99MS > dShort.Predictions[0].PredictedP99MS) {
		t.Errorf("quote with the restored lease: %d %%, p99 %v; alone %d %%, p99 %v", d.Pct,
			d.Predictions[0].PredictedP99MS, dShort.Pct, dShort.Predictions[0].PredictedP99MS)
	}
}

// unreadableStore is a store that could not read one of its records.
type unreadableStore struct{ Store }

func (s unreadableStore) Load(ctx context.Context) ([]*Lease, error) {
	ls, err := s.Store.Load(ctx)
	return ls, errors.Join(err, fmt.Errorf("lease \"garbled\": %w: invalid character", ErrUnreadable))
}

// TestRestoreTreatsTheStoreAsUntrusted: whatever the store holds, the
// sidecar starts. Records it cannot read and leases it cannot use are
// logged and skipped; a forged lease that claims 100 % for a year is held to
// lease.max and re-checked against the SLO, which throttles it.
func TestRestoreTreatsTheStoreAsUntrusted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRestoreTreatsTheStoreAsUntrusted)
}

func testRestoreTreatsTheStoreAsUntrusted(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	good := mustDecide(t, h, request("good"), Throttle)
	now := time.Now()
	valid := func(id string) Lease {
		return Lease{ID: id, TokenHash: sha256.Sum256([]byte(id)), JobID: "job-" + id, Pct: 50, MinPct: 5, MemoryMiB: 100,
			Profile: trainingProfile("resnet"), CreatedAt: now, ExpiresAt: now.Add(time.Minute), Duration: time.Minute}
	}
	bad := map[string]func(*Lease){
		"noprofile": func(l *Lease) { l.Profile = nil },
		"nominpct":  func(l *Lease) { l.MinPct = 0 },
		"hugemem":   func(l *Lease) { l.MemoryMiB = -1 << 62 },
		"badpid":    func(l *Lease) { l.PIDs = []int{MaxPID + 1} },
		"notoken":   func(l *Lease) { l.TokenHash = [32]byte{} },
		"badjob":    func(l *Lease) { l.JobID = "job;rm" },
		// A record that would put anything in a job's CUDA_VISIBLE_DEVICES.
		"badinstance": func(l *Lease) {
			l.Instance = &InstanceGrant{UUID: "MIG-0 LD_PRELOAD=/x", Profile: "3g.71gb", SMs: 60, MemoryMiB: 71168}
		},
		"smlessinstance": func(l *Lease) { l.Instance = &InstanceGrant{UUID: uuid3g, Profile: "3g.71gb", MemoryMiB: 71168} },
	}
	for id, edit := range bad {
		l := valid(id)
		edit(&l)
		if err := h.store.Save(ctx, &l); err != nil {
			t.Fatal(err)
		}
	}
	forged := valid("forged")
	forged.Pct, forged.ExpiresAt, forged.Duration = 100, now.Add(365*24*time.Hour), 365*24*time.Hour
	if err := h.store.Save(ctx, &forged); err != nil {
		t.Fatal(err)
	}

	var logs strings.Builder
	h2 := newHarness(t, predictor.ModeMPS, 9, nil)
	h2.c.deps.Store = unreadableStore{h.store}
	h2.c.log = slog.New(slog.NewTextHandler(&logs, nil))
	if err := h2.c.Restore(ctx); err != nil {
		t.Fatalf("restore: %v", err)
	}
	got := map[string]Lease{}
	for _, l := range h2.c.Leases() {
		got[l.ID] = l
	}
	if len(got) != 2 || got[good.Lease.ID].ID == "" || got["forged"].ID == "" {
		t.Fatalf("restored %v, want the good and the forged lease", got)
	}
	f := got["forged"]
	if limit := now.Add(h2.c.cfg.Lease.Max); f.ExpiresAt.After(limit) || f.Duration > h2.c.cfg.Lease.Max {
		t.Errorf("forged lease expires %s (duration %s), want at most lease.max from now", f.ExpiresAt, f.Duration)
	}
	if f.Pct == 100 && !f.Revoked {
		t.Errorf("forged lease kept 100 %% although the SLO does not hold there")
	}
	var throttled bool
	for _, ev := range h2.events.all() {
		throttled = throttled || ev.LeaseID == "forged" && (ev.Type == EventThrottle || ev.Type == EventRevoke)
	}
	if !throttled {
		t.Errorf("no throttle or revoke event for the forged lease: %+v", h2.events.all())
	}
	for _, want := range append([]string{"garbled"}, "noprofile", "nominpct", "hugemem", "badpid", "notoken", "badjob", "badinstance", "smlessinstance") {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not name %q:\n%s", want, logs.String())
		}
	}
}
