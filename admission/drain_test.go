package admission

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// A drain revokes every live lease with the guard's deadline, denies
// admits and quotes with its own code and says so in the summary; an
// undrain admits again.
func TestDrainRevokesAndDeniesUntilUndrain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, predictor.ModeMPS, 1e6, nil)
		a, b := mustDecide(t, h, request("a"), Grant), mustDecide(t, h, request("b"), Grant)
		since := h.c.now()
		evs, err := h.c.Drain(ctx, Drain{Since: since, Reason: "driver upgrade"})
		if err != nil || len(evs) != 2 {
			t.Fatalf("Drain: %+v, %v; want two revokes", evs, err)
		}
		for _, e := range evs {
			if e.Type != EventRevoke || !strings.Contains(e.Reason, "drained by its operator") || !strings.Contains(e.Reason, "driver upgrade") ||
				!e.Deadline.Equal(since.Add(h.c.cfg.Guard.Deadline)) {
				t.Errorf("event %+v: want a revoke that names the drain, due in admission.guard.deadline", e)
			}
		}
		for _, l := range h.c.Leases() {
			if (l.ID == a.Lease.ID || l.ID == b.Lease.ID) && !l.Revoked {
				t.Errorf("lease %s not revoked by the drain", l.ID)
			}
		}
		d := mustDecide(t, h, request("c"), Deny)
		if d.Code != CodeDraining || !strings.Contains(d.Message, "driver upgrade") {
			t.Errorf("admit while drained: %s %q, want %s naming the reason", d.Code, d.Message, CodeDraining)
		}
		if q, err := h.c.Quote(ctx, request("q")); err != nil || q.Code != CodeDraining {
			t.Errorf("quote while drained: %s, %v; want %s", q.Code, err, CodeDraining)
		}
		if sum, err := h.c.Summarize(ctx, request("typical")); err != nil || sum.Healthy || !sum.Draining {
			t.Errorf("summary while drained: %+v, %v; want not healthy, draining", sum, err)
		}
		if dr, ok := h.c.Draining(); !ok || !dr.Since.Equal(since) {
			t.Errorf("Draining = %+v, %v", dr, ok)
		}
		// Again: the reason changes, nothing is revoked twice.
		if evs, err := h.c.Drain(ctx, Drain{Since: since, Reason: "still"}); err != nil || len(evs) != 0 {
			t.Errorf("a second drain: %+v, %v; want nothing revoked", evs, err)
		}
		time.Sleep(h.c.cfg.Guard.Deadline + time.Second)
		h.c.Expire(ctx)
		h.c.Undrain()
		if _, ok := h.c.Draining(); ok {
			t.Error("still draining after Undrain")
		}
		mustDecide(t, h, request("after"), Grant)
	})
}
