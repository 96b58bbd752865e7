package admission

import (
	"context"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// After the store lost everything, Resync writes the live leases again and
// they work as before: a renew's compare-and-swap finds its revision.
func TestResyncRewritesALostStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	a, b := grantTwo(t, h)
	if _, err := h.c.Renew(ctx, a.Lease.ID, tokenOf(a)); err != nil {
		t.Fatal(err)
	}
	lost := NewMemStore()
	h.c.deps.Store = lost // the bucket is gone; the sidecar made a new one
	if _, err := h.c.Renew(ctx, a.Lease.ID, tokenOf(a)); err == nil {
		t.Fatal("a renew against an empty store succeeded before the resync")
	}
	n, err := h.c.Resync(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Resync = %d, %v; want 2 leases written", n, err)
	}
	stored, err := lost.Load(ctx)
	if err != nil || len(stored) != 2 {
		t.Fatalf("the new store holds %d leases (%v), want 2", len(stored), err)
	}
	for _, d := range []Decision{a, b} {
		if _, err := h.c.Renew(ctx, d.Lease.ID, tokenOf(d)); err != nil {
			t.Errorf("renew %s after the resync: %v", d.Lease.ID, err)
		}
	}
}
