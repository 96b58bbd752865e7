package admission

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// fakeObserver reports a set rate per service.
type fakeObserver struct {
	mu    sync.Mutex
	rates map[string]float64
}

func (f *fakeObserver) ObservedRate(service string) (float64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rates[service]
	return r, ok
}

func (f *fakeObserver) set(service string, rps float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rates == nil {
		f.rates = map[string]float64{}
	}
	f.rates[service] = rps
}

// firstService is the first service's prediction in h's status.
func firstService(t *testing.T, h *harness) ServicePrediction {
	t.Helper()
	st, err := h.c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Services[0]
}

// TestObservedRateRaisesThePrediction: a service that serves more than its
// configured rate is predicted at what it serves (rounded up to its 5 %
// band); one that serves less keeps the configured rate until the guard can
// throttle when load returns.
func TestObservedRateRaisesThePrediction(t *testing.T) {
	t.Parallel()
	obs := &fakeObserver{}
	h := newHarness(t, predictor.ModeMPS, 1e6, nil)
	h.c.deps.Observer = obs
	status := func() ServicePrediction { return firstService(t, h) }
	base := status()
	if base.RateRPS != 100 {
		t.Fatalf("rate %g without an observation, want the configured 100", base.RateRPS)
	}
	obs.set("bert", 40)
	if got := status(); got.RateRPS != 100 || got.PredictedP99MS != base.PredictedP99MS {
		t.Errorf("observed below the configured rate: rate %g, p99 %g; want 100, %g", got.RateRPS, got.PredictedP99MS, base.PredictedP99MS)
	}
	obs.set("bert", 150)
	got := status()
	if want := rateBand(150); got.RateRPS != want || !(got.RateRPS >= 150 && got.RateRPS < 150*1.05) {
		t.Errorf("observed 150: rate %g, want the band %g", got.RateRPS, want)
	}
	if !(got.PredictedP99MS > base.PredictedP99MS) {
		t.Errorf("p99 %g at 150 req/s, not above %g at 100", got.PredictedP99MS, base.PredictedP99MS)
	}
	obs.set("bert", 151) // same band: the same cached prediction
	misses := h.model.Stats().Misses
	if again := status(); again.PredictedP99MS != got.PredictedP99MS || h.model.Stats().Misses != misses {
		t.Errorf("a rate in the same band predicted again")
	}
}

// With plan_below_configured a lull is planned on: a service serving less
// than its configured rate is predicted at its observed band (never above
// the configured rate), and a lease granted on it fits more than at the
// configured rate.
func TestPlanBelowConfiguredHarvestsALull(t *testing.T) {
	t.Parallel()
	obs := &fakeObserver{}
	h := newHarness(t, predictor.ModeMPS, 1e6, func(c *Config) { c.Guard.PlanBelowConfigured = true })
	h.c.deps.Observer = obs
	status := func() ServicePrediction { return firstService(t, h) }
	base := status()
	obs.set("bert", 40)
	got := status()
	if want := rateBand(40); got.RateRPS != want || !(got.RateRPS >= 40 && got.RateRPS < 40*1.05) {
		t.Errorf("observed 40 of a configured 100: rate %g, want the band %g", got.RateRPS, want)
	}
	if !(got.PredictedP99MS < base.PredictedP99MS) {
		t.Errorf("p99 %g at 40 req/s, not below %g at 100", got.PredictedP99MS, base.PredictedP99MS)
	}
	obs.set("bert", 99.9) // the band above 99.9 is above 100: the configured rate caps it
	if got := status(); got.RateRPS != 100 {
		t.Errorf("observed 99.9: rate %g, want the configured 100", got.RateRPS)
	}
	obs.set("bert", 0) // an idle server plans at the configured rate, not at none
	if got := status(); got.RateRPS != 100 {
		t.Errorf("observed 0: rate %g, want the configured 100", got.RateRPS)
	}
}

func TestRateBand(t *testing.T) {
	t.Parallel()
	for _, r := range []float64{0.001, 0.6, 1, 8.5, 150, 1e6} {
		b := rateBand(r)
		if !(b >= r && b < r*1.05+1e-12) || math.Abs(rateBand(b)-b) > 1e-9*b {
			t.Errorf("band(%g) = %g: want in [r, 1.05 r) and stable", r, b)
		}
	}
}

// TestGuardFollowsObservedLoad: a lease granted in full at the configured
// rate is throttled (or revoked) when the server reports load that no
// longer fits, once; the same load again plans nothing, and a load back
// under the configured rate raises nothing.
func TestGuardFollowsObservedLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newTestModel(t)
	svc := bert()
	trainer := []Trainer{{Profile: trainingProfile("resnet"), Pct: 100}}
	low, err := m.PredictP99(ctx, []ServiceSpec{svc}, 0, trainer, predictor.ModeMPS)
	if err != nil {
		t.Fatal(err)
	}
	svc.RateRPS = rateBand(250)
	high, err := m.PredictP99(ctx, []ServiceSpec{svc}, 0, trainer, predictor.ModeMPS)
	if err != nil {
		t.Fatal(err)
	}
	if !(high.P99MS > low.P99MS) {
		t.Fatalf("p99 %g at 250 req/s, not above %g at 100", high.P99MS, low.P99MS)
	}
	// The limit (1 - headroom) × SLO lies between the two.
	slo := (low.P99MS + high.P99MS) / 2 / 0.9
	obs := &fakeObserver{}
	h := newHarness(t, predictor.ModeMPS, slo, nil)
	h.c.deps.Observer = obs
	d := mustDecide(t, h, request("r1"), Grant)
	if d.Pct != 100 {
		t.Fatalf("granted at %d %%, want 100", d.Pct)
	}
	if ev, err := h.c.Guard(ctx); err != nil || len(ev) != 0 {
		t.Fatalf("no observation: events %v, %v", ev, err)
	}
	obs.set("bert", 250)
	ev, err := h.c.Guard(ctx)
	if err != nil || len(ev) != 1 || (ev[0].Type != EventThrottle && ev[0].Type != EventRevoke) {
		t.Fatalf("load at 250 req/s: events %+v, %v; want one throttle or revoke", ev, err)
	}
	if ev[0].Type == EventThrottle && !(ev[0].Pct < 100 && ev[0].Pct >= 10) {
		t.Errorf("throttled to %d %%", ev[0].Pct)
	}
	if ev, err := h.c.Guard(ctx); err != nil || len(ev) != 0 {
		t.Errorf("the same load again: events %v, %v", ev, err)
	}
	obs.set("bert", 20)
	if ev, err := h.c.Guard(ctx); err != nil || len(ev) != 0 {
		t.Errorf("load back under the configured rate: events %v, %v", ev, err)
	}
}
