package admission

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/simclock"
	"github.com/colocd/colocd/predictor"
)

// heldServer is an observed server on a test's clock: its rate and p99
// are what the test sets, its window begins before anything was granted
// (so that no correction is measured from it).
type heldServer struct {
	*simclock.Clock
	mu   sync.Mutex
	rate float64
	p99  float64
}

func (s *heldServer) set(rate, p99 float64) {
	s.mu.Lock()
	s.rate, s.p99 = rate, p99
	s.mu.Unlock()
}

func (s *heldServer) ObservedRate(string) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate, s.rate > 0
}

func (s *heldServer) Watches(string) bool { return true }

func (s *heldServer) ObservedWindow(string, time.Time) (ObservedWindow, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ObservedWindow{P99MS: s.p99, End: s.Now(), Requests: 1000}, s.p99 > 0
}

// A load with no room for a lease even at its min_pct throttles it to its
// min_pct at once and revokes it only once it has lasted RevokeAfter; past
// MaxRevokesPerHour a lease stays at its min_pct until the observed p99 is
// over the SLO.
func TestGuardHoldsRevokes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newTestModel(t)
	svc := bert()
	at := func(rate float64, pct int) float64 {
		s := svc
		s.RateRPS = rate
		p, err := m.PredictP99(ctx, []ServiceSpec{s}, 0, []Trainer{{Profile: trainingProfile("resnet"), Pct: pct}}, predictor.ModeMPS)
		if err != nil {
			t.Fatal(err)
		}
		return p.P99MS
	}
	limit := 1.1 * at(100, 100) // a job fits in full at the configured rate
	high := math.NaN()
	for _, r := range []float64{200, 400, 800, 1600, 3200} {
		if at(rateBand(r), 10) > limit {
			high = r
			break
		}
	}
	if math.IsNaN(high) {
		t.Fatal("no rate up to 3200 req/s leaves a job at 10 % over the limit")
	}
	srv := &heldServer{Clock: simclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	h := newHarness(t, predictor.ModeMPS, limit/0.9, func(c *Config) {
		c.Guard.MaxRevokesPerHour = 1
		c.Guard.Deadline = 10 * time.Minute // the launcher's restart is not what is tested
		c.Guard.GrantBeforeMeasured = true  // nor the first grant's measurement (TestFirstGrantWaitsForAMeasurement)
	})
	h.c.deps.Observer, h.c.deps.Clock = srv, srv.Now
	guard := func(what string) []Event {
		t.Helper()
		ev, err := h.c.Guard(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return ev
	}
	one := func(what string, ev []Event, typ EventType, lease string) {
		t.Helper()
		if len(ev) != 1 || ev[0].Type != typ || ev[0].LeaseID != lease {
			t.Fatalf("%s: events %+v; want one %s of %s", what, ev, typ, lease)
		}
	}

	first := mustDecide(t, h, request("first"), Grant)
	srv.set(high, 0)
	ev := guard("the load rises")
	one("the load rises", ev, EventThrottle, first.Lease.ID)
	if ev[0].Pct != 10 {
		t.Fatalf("throttled to %d %%, want the lease's min_pct, 10", ev[0].Pct)
	}
	srv.Advance(30 * time.Second)
	if ev := guard("30 s on"); len(ev) != 0 {
		t.Fatalf("30 s into the rise: events %+v; want the revoke held", ev)
	}
	srv.Advance(31 * time.Second)
	one("61 s on", guard("61 s on"), EventRevoke, first.Lease.ID)

	// A new job waits as long as a raise would after the revoke.
	srv.set(50, 0)
	guard("the load falls")
	if d := mustDecide(t, h, request("too-soon"), Deny); d.Code != CodeRecentRevoke {
		t.Fatalf("a job right after the revoke: %s (%s), want %s", d.Code, d.Message, CodeRecentRevoke)
	}
	srv.Advance(DefaultRaiseAfter)

	// The budget: one revoke an hour.
	second := mustDecide(t, h, request("second"), Grant)
	srv.set(high, 0)
	one("the load rises again", guard("the load rises again"), EventThrottle, second.Lease.ID)
	srv.Advance(2 * time.Minute)
	if ev := guard("past the hold, past the budget"); len(ev) != 0 {
		t.Fatalf("a second revoke within the hour: events %+v; want the lease kept at its min_pct", ev)
	}
	srv.set(high, limit/0.9*1.2)
	one("the observed p99 over the SLO", guard("the observed p99 over the SLO"), EventRevoke, second.Lease.ID)
}

// After the guard's revokes, a new job waits raise_after from the last,
// doubled for each further revoke in the last hour, at most max_hold (an
// hour by default).
func TestReadmitWaitsLongerAfterEachRevoke(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	tests := []struct {
		name    string
		revokes []time.Time
		maxHold time.Duration
		want    time.Time
	}{
		{"none", nil, 0, time.Time{}},
		{"one", []time.Time{ago(2)}, 0, ago(2).Add(5 * time.Minute)},
		{"two", []time.Time{ago(30), ago(2)}, 0, ago(2).Add(10 * time.Minute)},
		{"three", []time.Time{ago(50), ago(30), ago(2)}, 0, ago(2).Add(20 * time.Minute)},
		{"one older than an hour", []time.Time{ago(61), ago(2)}, 0, ago(2).Add(5 * time.Minute)},
		{"many: an hour at most", []time.Time{ago(59), ago(50), ago(40), ago(30), ago(20), ago(10), ago(5), ago(2)}, 0, ago(2).Add(time.Hour)},
		{"three, max_hold 15m", []time.Time{ago(50), ago(30), ago(2)}, 15 * time.Minute, ago(2).Add(15 * time.Minute)},
		{"one, max_hold under raise_after", []time.Time{ago(2)}, time.Minute, ago(2).Add(5 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := holds{revokes: tt.revokes}
			g := DefaultSettings().Guard
			g.RaiseAfter = 5 * time.Minute // the doubling, at a raise_after that shows it
			if tt.maxHold > 0 {
				g.MaxHold = tt.maxHold
			}
			if got := h.readmitAt(g, now); !got.Equal(tt.want) {
				t.Errorf("readmit at %v, want %v", got, tt.want)
			}
		})
	}
}
