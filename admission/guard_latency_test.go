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

func (f *fakeLatency) Watches(string) bool { return true }

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
		h := newHarness(t, predictor.ModeMPS, slo, func(c *Config) {
			c.Guard.GrantBeforeMeasured = true // both granted in full, as the predictor allows
		})
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

// A window with no training job running that is faster than the
// correction lowers it, as any window does; but it shows the service
// alone, not what co-location costs, so a new job then starts at its
// min_pct again until the guard has measured it (measure_first).
func TestSoloWindowMeasuresAgainFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	one, solo := resnetP99(t, 100), resnetP99(t)
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, predictor.ModeMPS, one/0.9*3, nil)
		obs := &fakeLatency{}
		h.c.deps.Observer = obs
		d := mustDecide(t, h, request("job"), Throttle) // measure_first
		if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{100}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(time.Minute)
		obs.set(resnetP99(t, float64(d.Pct))*2, start)
		if _, err := h.c.Guard(ctx); err != nil {
			t.Fatal(err)
		}
		if corr := h.c.Corrections()["bert"]; corr < 2 {
			t.Fatalf("correction %v next to the job, want 2 rounded up", corr)
		}
		if d := mustQuote(t, h, request("measured")); d.Code == CodeMeasureFirst {
			t.Fatalf("a quote once measured: %s (%s), want no measure_first", d.Code, d.Message)
		}
		if err := h.c.Release(ctx, d.Lease.ID, tokenOf(d)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		gone := time.Now()
		time.Sleep(time.Minute)
		obs.set(solo, gone) // alone, as fast as predicted
		if _, err := h.c.Guard(ctx); err != nil {
			t.Fatal(err)
		}
		if c := h.c.Corrections(); len(c) != 0 {
			t.Errorf("after a window of the service alone as predicted: corrections %v, want none", c)
		}
		if d := mustDecide(t, h, request("again"), Throttle); d.Code != CodeMeasureFirst {
			t.Errorf("a new job after the service alone lowered the correction: %s (%s), want %s", d.Code, d.Message, CodeMeasureFirst)
		}
	})
}

// Until the guard has measured the server next to a training job, a new
// job starts at its min_pct (a throttle that says why), and is raised once
// the measurement shows room; later jobs are granted what fits. Without a
// latency observer, or with admission.guard.grant_before_measured, a job
// gets what fits at once.
func TestFirstGrantWaitsForAMeasurement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	one := resnetP99(t, 100)
	synctest.Test(t, func(t *testing.T) {
		slo := one / 0.9 * 3 // two jobs at 100 % fit
		h := newHarness(t, predictor.ModeMPS, slo, nil)
		mustDecide(t, h, request("no-observer"), Grant)

		h = newHarness(t, predictor.ModeMPS, slo, nil)
		obs := &fakeLatency{}
		h.c.deps.Observer = obs
		first := mustDecide(t, h, request("first"), Throttle)
		if first.Code != CodeMeasureFirst || first.Pct != first.Lease.MinPct || !strings.Contains(first.Message, "not yet measured") {
			t.Fatalf("first job: %s at %d %% (%s), want %s at its min_pct", first.Code, first.Pct, first.Message, CodeMeasureFirst)
		}
		if err := h.c.Register(ctx, first.Lease.ID, tokenOf(first), []int{100}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(time.Minute)
		obs.set(resnetP99(t, float64(first.Pct)), start) // as predicted
		for range 7 * 60 {                               // the guard's ticks, past raise_after
			if _, err := h.c.Guard(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		raised := false
		for _, ev := range h.events.all() {
			raised = raised || ev.Type == EventRaise && ev.LeaseID == first.Lease.ID && ev.Pct == 100
		}
		if !raised {
			t.Errorf("events %+v: want the first job raised to 100 %% once measured", h.events.all())
		}
		if d := mustDecide(t, h, request("second"), Grant); d.Code != CodeFits {
			t.Errorf("second job, once measured: %s (%s), want %s", d.Code, d.Message, CodeFits)
		}

		h = newHarness(t, predictor.ModeMPS, slo, func(c *Config) { c.Guard.GrantBeforeMeasured = true })
		h.c.deps.Observer = &fakeLatency{}
		mustDecide(t, h, request("trusted"), Grant)
	})
}
