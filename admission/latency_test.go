package admission

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// fakeLatency is a server whose observed p99 and window start a test sets;
// its rate is never above the configured one.
type fakeLatency struct {
	mu    sync.Mutex
	p99   float64
	since time.Time
}

func (f *fakeLatency) ObservedRate(string) (float64, bool) { return 0, false }

func (f *fakeLatency) ObservedWindow(string, time.Time) (ObservedWindow, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ObservedWindow{P99MS: f.p99, Since: f.since, End: time.Now(), Requests: 1000}, f.p99 > 0
}

func (f *fakeLatency) set(p99 float64, since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.p99, f.since = p99, since
}

// The predictor is off by 1.5×: both leases fit by the prediction, but
// the server's own p99 is over the limit. The observation, not the
// prediction, throttles the newest lease; a window that saw another lease
// set, or a server as fast as predicted, corrects nothing.
func TestObservedP99CorrectsThePrediction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	both := resnetP99(t, 100, 100)
	synctest.Test(t, func(t *testing.T) {
		slo := both / 0.9 * 1.2 // both at 100 % fit by 20 %
		h := newHarness(t, predictor.ModeMPS, slo, nil)
		obs := &fakeLatency{}
		h.c.deps.Observer = obs
		first, second := request("first"), request("second")
		a := mustDecide(t, h, first, Grant)
		time.Sleep(time.Second)
		b := mustDecide(t, h, second, Grant)
		for i, d := range []Decision{a, b} { // their workers run
			if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{100 + i}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		time.Sleep(time.Minute)

		// A window that began before the second grant saw one lease.
		obs.set(both*1.5, start.Add(-time.Second))
		if evs, err := h.c.Guard(ctx); err != nil || len(evs) != 0 || len(h.c.Corrections()) != 0 {
			t.Fatalf("guard on a mixed window: %+v, %v, corrections %v; want nothing", evs, err, h.c.Corrections())
		}
		// As fast as predicted: no correction.
		obs.set(both*0.8, start)
		if evs, err := h.c.Guard(ctx); err != nil || len(evs) != 0 || len(h.c.Corrections()) != 0 {
			t.Fatalf("guard on a fast server: %+v, %v, corrections %v; want nothing", evs, err, h.c.Corrections())
		}
		// 1.5× slower than predicted.
		obs.set(both*1.5, start)
		evs, err := h.c.Guard(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if corr := h.c.Corrections()["bert"]; corr < 1.5 || corr > 1.5*rateStep {
			t.Errorf("correction %v, want 1.5 rounded up to its band", corr)
		}
		if len(evs) == 0 || evs[0].LeaseID != b.Lease.ID || !strings.Contains(evs[0].Reason, "own p99") {
			t.Fatalf("events %+v, want the newest lease lowered for the observed p99", evs)
		}
		for _, e := range evs {
			if e.LeaseID == a.Lease.ID && e.Type == EventRevoke {
				t.Errorf("the older lease was revoked: %+v", e)
			}
		}
		// The correction holds for decisions too, and their messages say so.
		d := mustQuote(t, h, request("third"))
		if d.Outcome != Deny || !strings.Contains(d.Message, "server's own p99") || d.Predictions[0].Correction <= 1 {
			t.Errorf("quote %s (%s) %+v, want a deny naming the correction", d.Outcome, d.Message, d.Predictions)
		}
		// Until what runs changes again, the same window corrects nothing more.
		if evs, err := h.c.Guard(ctx); err != nil || len(evs) != 0 {
			t.Errorf("a second guard round: %+v, %v", evs, err)
		}
		// The same service made an LLM engine: its correction was of
		// request latencies and says nothing of steps.
		engine := h.c.config().Services
		engine[0].BurstSteps = 16
		if _, err := h.c.UpdateServices(ctx, engine, h.c.config().Headroom); err != nil {
			t.Fatal(err)
		}
		if _, err := h.c.Guard(ctx); err != nil { // its next round prunes
			t.Fatal(err)
		}
		if c := h.c.Corrections(); len(c) != 0 {
			t.Errorf("corrections %v after the service became an engine, want none", c)
		}
	})
}
