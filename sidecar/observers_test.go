package sidecar

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/observe"
)

// loadPage is a vLLM server's page after n requests, half of them within
// 300 ms and all within 500 ms.
func loadPage(n float64) string {
	return vllmPage(n, 300, latencyBound{300, 0.5}, latencyBound{500, 1})
}

// TestObservedLoadRaisesPredictions: a service whose server serves far more
// than its configured rate is predicted at the observed rate, in status and
// in a quote, and status shows what the server reports.
func TestObservedLoadRaisesPredictions(t *testing.T) {
	t.Parallel()
	srv := newMetricsServer(t, 500, loadPage) // 500 requests a second at 1 s scrapes, against 8 configured
	cfg := testConfig(t, "gpu-observed", 1e6)
	cfg.Services[0].Metrics = observe.Endpoint{URL: srv.url, Preset: "vllm", Interval: time.Second}
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for k := 0; k < 3; { // the third scrape: the second reading is in the window
		select {
		case k = <-srv.scrapes:
		case <-ctx.Done():
			t.Fatal("the server was not scraped three times")
		}
	}
	st, err := c.Status(ctx, "gpu-observed")
	if err != nil {
		t.Fatal(err)
	}
	svc := st.Services[0]
	o := svc.Observed
	if o == nil || o.State != string(observe.StateFresh) || o.RateRPS == nil || *o.RateRPS < 100 || o.P99MS == nil {
		t.Fatalf("observed %+v", o)
	}
	if svc.RateRPS != 8 || !(svc.PredictedAtRPS >= *o.RateRPS*0.5) || !(svc.PredictedAtRPS > 8) {
		t.Errorf("configured %g, predicted at %g; want 8 and about the observed %g", svc.RateRPS, svc.PredictedAtRPS, *o.RateRPS)
	}
	// /metrics shows what the server reports, once the guard's next tick
	// has recorded it.
	for _, want := range []string{`colocd_observed_rate_per_second{`, `colocd_observed_p99_milliseconds{`, `colocd_observed_age_seconds{`} {
		if !eventually(ctx, func() bool { return strings.Contains(getMetrics(t, s), want) }) {
			t.Errorf("/metrics lacks %s:\n%s", want, getMetrics(t, s))
		}
	}
	d, err := c.Quote(ctx, admitReq("observed", 10, 50), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) == 0 || len(d[0].Predictions) == 0 || !(d[0].Predictions[0].RateRPS > 8) {
		t.Errorf("a quote predicted at %+v, want the observed rate", d)
	}
}

// TestWatchedServicesFollowReloads: a new metrics section starts an
// observer, a changed one moves it to the new server, and a removed one
// stops it.
func TestWatchedServicesFollowReloads(t *testing.T) {
	t.Parallel()
	a, b := newMetricsServer(t, 10, loadPage), newMetricsServer(t, 10, loadPage)
	svc := func(url string) []configs.Service {
		s := configs.Service{Name: "chat"}
		if url != "" {
			s.Metrics = observe.Endpoint{URL: url, Preset: "vllm", Interval: time.Second}
		}
		return []configs.Service{s}
	}
	w := newWatchedServices(slog.New(slog.DiscardHandler), svc(a.url))
	stop := background(w.Run)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	wait := func(ch <-chan int, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s was not scraped", what)
		}
	}
	wait(a.scrapes, "the first server")
	w.set(svc(b.url))
	wait(b.scrapes, "the server after the reload")
	w.set(svc(""))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := w.Observe("chat"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the observer was not stopped when its section went")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGuardThrottlesOnObservedLoad: a lease granted in full at the
// configured rate gets a throttle (or revoke) event when the server's own
// metrics show a load at which it no longer fits.
func TestGuardThrottlesOnObservedLoad(t *testing.T) {
	t.Parallel()
	low, high := p99AtRate(t, 100, 8), p99AtRate(t, 100, 10)
	if !(high > low) {
		t.Fatalf("p99 %g at 10 req/s, not above %g at 8", high, low)
	}
	srv := newMetricsServer(t, 0, loadPage) // idle: nothing observed above the configured rate
	cfg := testConfig(t, "gpu-guard", (low+high)/2/(1-configs.Default().Admission.Headroom))
	cfg.Services[0].Metrics = observe.Endpoint{URL: srv.url, Preset: "vllm", Interval: time.Second}
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events, err := c.Events(ctx, s.ID(), "guarded", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Stop()
	d, err := c.Admit(ctx, s.ID(), admitReq("guarded", 10, 100))
	if err != nil || d.Lease == nil || d.Lease.ActiveThreadPct != 100 {
		t.Fatalf("admit: %v %+v", err, d)
	}
	srv.setStep(40) // about 40 req/s at one scrape a second, five times the configured rate
	for k := 0; k < 3; {
		select {
		case k = <-srv.scrapes:
		case <-ctx.Done():
			t.Fatal("not scraped")
		}
	}
	select {
	case rec := <-events.C():
		if rec.Event.LeaseID != d.Lease.ID || (rec.Event.Type != bus.EventThrottle && rec.Event.Type != bus.EventRevoke) {
			t.Errorf("event %+v, want a throttle or revoke of %s", rec.Event, d.Lease.ID)
		}
	case <-ctx.Done():
		t.Fatal("no guard event")
	}
}

func getMetrics(t *testing.T, s *running) string {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventually polls cond until it holds or ctx ends: for figures a loop of
// the sidecar records on its own timer.
func eventually(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}
