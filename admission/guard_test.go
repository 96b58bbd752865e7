package admission

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// scrapedServer is an observed server scraped every 5 s, as the default
// observer is: a window asked for since a moment begins at the first
// scrape after it, and holds enough requests once a scrape has followed.
type scrapedServer struct{ p99 float64 }

func (s *scrapedServer) ObservedRate(string) (float64, bool) { return 0, false }
func (s *scrapedServer) Watches(string) bool                 { return true }
func (s *scrapedServer) ObservedWindow(_ string, since time.Time) (ObservedWindow, bool) {
	const scrape = 5 * time.Second
	end := time.Now().Truncate(scrape)
	first := since.Truncate(scrape).Add(scrape)
	if !end.After(first) || !(s.p99 > 0) {
		return ObservedWindow{}, false
	}
	return ObservedWindow{Since: first, End: end, Requests: 1000, P99MS: s.p99, P99SureMS: 0.9 * s.p99}, true
}

// The acceptance check of the broken SLO, on the clock: a lease at its
// min_pct beside a server whose observed p99 is three times its SLO is
// revoked within 15 s of its workers registering, with the guard checking
// each second as the sidecar does.
func TestGuardRevokesWithin15sOfABrokenSLOAtMinPct(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const slo = 1000.0 // far above any prediction: only the observation speaks
		srv := &scrapedServer{}
		h := newHarness(t, predictor.ModeMPS, slo, func(c *Config) { c.Guard.GrantBeforeMeasured = true })
		h.c.deps.Observer, h.c.deps.Clock = srv, time.Now
		req := request("victim")
		req.MinPct = 100
		d := mustDecide(t, h, req, Grant)
		if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{4242}); err != nil {
			t.Fatal(err)
		}
		srv.p99 = 3 * slo
		registered := time.Now()
		for time.Since(registered) <= 15*time.Second {
			time.Sleep(time.Second)
			ev, err := h.c.Guard(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ev) == 1 && ev[0].Type == EventRevoke && ev[0].LeaseID == d.Lease.ID {
				t.Logf("revoked %s after the register", time.Since(registered))
				return
			}
			if len(ev) != 0 {
				t.Fatalf("after %s: events %+v, want a revoke or nothing", time.Since(registered), ev)
			}
		}
		t.Fatalf("no revoke within 15 s of the register")
	})
}

// The guard's keys of the second round name themselves when out of range.
func TestGuardKeysValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*GuardSettings)
		want string
	}{
		{"response_quantile", func(g *GuardSettings) { g.ResponseQuantile = 1.5 }, "admission.guard.response_quantile"},
		{"raise_step_pct", func(g *GuardSettings) { g.RaiseStepPct = -5 }, "admission.guard.raise_step_pct"},
		{"raise_fail_load", func(g *GuardSettings) { g.RaiseFailLoad = -0.1 }, "admission.guard.raise_fail_load"},
	} {
		s := DefaultSettings()
		tc.edit(&s.Guard)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	if err := DefaultSettings().Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
