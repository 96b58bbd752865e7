package admission

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/simclock"
	"github.com/colocd/colocd/predictor"
)

// brokenServer is an observed server on a test's clock whose window is
// the last 30 s: a p99 the test sets, over requests enough to judge.
type brokenServer struct {
	*simclock.Clock
	mu  sync.Mutex
	p99 float64
}

func (s *brokenServer) ObservedRate(string) (float64, bool) { return 0, false }
func (s *brokenServer) Watches(string) bool                 { return true }
func (s *brokenServer) ObservedWindow(string, time.Time) (ObservedWindow, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := s.Now()
	return ObservedWindow{Since: end.Add(-30 * time.Second), End: end, Requests: 1000, P99MS: s.p99, P99SureMS: 0.9 * s.p99}, s.p99 > 0
}

// A lease at its min_pct beside a server whose observed p99 is three
// times its SLO is revoked, with the guard's deadline, as soon as a
// window that began after the lease last changed shows it (not
// revoke_after later, and whatever the revoke budget); a lease above its
// min_pct is throttled first.
func TestGuardRevokesAtOnceWhenTheSLOIsBrokenAtMinPct(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const slo = 1000.0 // far above any prediction: only the observation speaks
	for _, tc := range []struct {
		name       string
		min        int
		wantRevoke bool
	}{
		{name: "at its min_pct", min: 100, wantRevoke: true},
		{name: "above its min_pct", min: 10, wantRevoke: false},
	} {
		srv := &brokenServer{Clock: simclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
		h := newHarness(t, predictor.ModeMPS, slo, func(c *Config) {
			c.Guard.MaxRevokesPerHour = 1
			c.Guard.GrantBeforeMeasured = true
		})
		h.c.deps.Observer, h.c.deps.Clock = srv, srv.Now
		req := request("victim")
		req.MinPct = tc.min
		d := mustDecide(t, h, req, Grant)
		h.c.mu.Lock()
		h.c.g.holds.revokes = []time.Time{srv.Now()} // the budget is spent: it must not hold this back
		h.c.mu.Unlock()
		if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{4242}); err != nil {
			t.Fatal(err)
		}
		srv.mu.Lock()
		srv.p99 = 3 * slo
		srv.mu.Unlock()
		// The first window began before the register: it saw the lease set
		// change, and judges nothing.
		srv.Advance(10 * time.Second)
		if ev, _ := h.c.g.revokeBroken(ctx); len(ev) != 0 {
			t.Fatalf("%s: a window that began before the lease ran: events %+v, want none", tc.name, ev)
		}
		srv.Advance(25 * time.Second) // two 15 s scrape windows after the register
		ev, err := h.c.Guard(ctx)
		if err != nil {
			t.Fatal(err)
		}
		revoked := len(ev) == 1 && ev[0].Type == EventRevoke && ev[0].LeaseID == d.Lease.ID
		if revoked != tc.wantRevoke {
			t.Fatalf("%s: events %+v; want a revoke %v", tc.name, ev, tc.wantRevoke)
		}
		if !tc.wantRevoke && (len(ev) != 1 || ev[0].Type != EventThrottle) {
			t.Fatalf("%s: events %+v; want the lease throttled first", tc.name, ev)
		}
		if revoked && !ev[0].Deadline.Equal(srv.Now().Add(h.c.cfg.Guard.Deadline)) {
			t.Errorf("%s: deadline %v, want the guard's %s from now", tc.name, ev[0].Deadline, h.c.cfg.Guard.Deadline)
		}
	}
}
