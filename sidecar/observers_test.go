package sidecar

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/runtest"
	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/predictor/calibrate"
	"github.com/colocd/colocd/simserver"
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
	cfg := watching(t, "gpu-observed", 1e6, srv.url)
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
	for _, want := range []string{`colocd_observed_rate_per_second{`, `colocd_observed_p99_seconds{`, `colocd_observed_age_seconds{`} {
		if !eventually(ctx, func() bool { return strings.Contains(getMetrics(t, s), want) }) {
			t.Errorf("/metrics lacks %s:\n%s", want, getMetrics(t, s))
		}
	}
	d, err := c.QuoteExpect(ctx, admitReq("observed", 10, 50), 20*time.Second, []string{"gpu-observed"})
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
	runtest.UntilCleanup(t, w.Run)
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
	cfg := watching(t, "gpu-guard", (low+high)/2/(1-configs.Default().Admission.Headroom), srv.url)
	cfg.Admission.Guard.GrantBeforeMeasured = true // a grant in full, as the prediction allows: the load is what is tested
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events, err := c.Events(ctx, s.ID(), "guarded", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Stop()
	d := leasedInFull(ctx, t, c, s.ID(), admitReq("guarded", 10, 100))
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
		if rec.Event.LeaseID != d.Lease.ID || (rec.Event.Type != v1.EventThrottle && rec.Event.Type != v1.EventRevoke) {
			t.Errorf("event %+v, want a throttle or revoke of %s", rec.Event, d.Lease.ID)
		}
	case <-ctx.Done():
		t.Fatal("no guard event")
	}
}

// slowServer serves a vLLM metrics page on which perScrape requests
// complete between two scrapes, every one with a latency in (lowMS, highMS].
func slowServer(t *testing.T, perScrape, lowMS, highMS float64) string {
	t.Helper()
	return newMetricsServer(t, perScrape, func(n float64) string {
		return vllmPage(n, highMS, latencyBound{lowMS, 0}, latencyBound{highMS, 1})
	}).url
}

// The predictor is off: the server's own p99 is 1.5 to 1.6 times what it
// predicts for the lease that runs, over the limit, while the prediction
// fits with room to spare. The observation, not the prediction, throttles
// the lease; status and /metrics show the correction.
func TestObservedP99ThrottlesWhenThePredictorIsLow(t *testing.T) {
	t.Parallel()
	pred := p99At(t, 100)
	// 6 requests a second, well under the configured 8: a scrape that is
	// late on a loaded machine, then a quick one, must not make the
	// observed rate pass the configured one and throttle for load first.
	url := slowServer(t, 6, 1.5*pred, 1.6*pred)
	cfg := watching(t, "gpu-slow", pred/0.9*1.2, url)
	cfg.Services[0].Metrics.Window = 20 * time.Second // 120 requests
	cfg.Admission.Guard.GrantBeforeMeasured = true    // a grant in full, as the prediction allows: the correction is what is tested
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// At 100 %, its workers run (a window is measured only then).
	_, sub := runningJob(ctx, t, c, s.ID(), "job-slow", 6001)
	// The first window that began after the grant and holds 100 requests.
	// On a machine busy enough to delay one scrape and hurry the next, the
	// observed rate can pass the configured one for a tick and throttle for
	// load first; the throttle for the observed p99 still follows.
	var ev v1.Event
	for {
		select {
		case rec := <-sub.C():
			ev = rec.Event
		case <-ctx.Done():
			t.Fatal("no event within 90 s")
		}
		if ev.Type != v1.EventThrottle || !strings.Contains(ev.Reason, "observed load rose") {
			break
		}
		t.Logf("a throttle for load first (a scrape late, the next quick): %s", ev.Reason)
	}
	if ev.Type != v1.EventThrottle || ev.ActiveThreadPct >= 100 || !strings.Contains(ev.Reason, "own p99") {
		t.Fatalf("event %+v, want a throttle for the observed p99", ev)
	}
	// The scrapes' observed rate may move after the throttle (a late scrape
	// then a quick one); the guard re-plans at the next tick, so the status
	// is read until it shows that plan.
	var svc v1.ServiceStatus
	corrected := func() bool {
		st, err := c.Status(ctx, s.ID())
		if err != nil || len(st.Services) == 0 {
			return false
		}
		svc = st.Services[0]
		return svc.Guard == "corrected" && svc.Correction >= 1.5 && svc.PredictedP99MS*svc.Correction <= 0.9*svc.SLOP99MS
	}
	if !eventually(ctx, corrected) {
		t.Errorf("status %+v, want the service corrected by about 1.5 and the corrected prediction within the limit", svc)
	}
	for _, want := range []string{`colocd_observed_over_predicted_bucket{`, `colocd_guard_correction{`} {
		if !eventually(ctx, func() bool { return strings.Contains(getMetrics(t, s), want) }) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The measured window is in the data dir, and makes a measurement
	// record for `colocd calibrate --from-observations`.
	dir := filepath.Join(cfg.Sidecar.DataDir, "observations")
	var m *calibrate.Measurements
	var err error
	if !eventually(ctx, func() bool { m, _, err = calibrate.FromObservations(dir); return err == nil }) {
		t.Fatalf("no measurement records from %s: %v", dir, err)
	}
	if r := m.Records[0]; r.TrainingPct != 100 || !(r.Measured.LatencyMS["p99"] >= 1.5*pred) || m.Device.Name != "NVIDIA H200" {
		t.Errorf("record %+v on %+v, want the window at 100 %% with its observed p99", r, m.Device)
	}
}

// simulatedServer serves the simulated inference server over HTTP: its
// latency is the predictor's for the clients the simulated MPS daemon
// shows, at their percentages.
func simulatedServer(t *testing.T, s *running, arrivals []time.Duration) string {
	t.Helper()
	inf, tr, cal := testModel(t)
	model := &simserver.Model{Inference: inf, Calibration: cal, Mode: predictor.ModeMPS, Requests: testRequests, Seed: 1, SMs: 132}
	trKey := tr.Key()
	srv, err := simserver.New(simserver.Config{Preset: "vllm", ModelName: "m", Arrivals: arrivals, Start: time.Now(), Latency: model,
		Trainers: func() []simserver.Trainer {
			clients, err := s.sim.mps.Clients(context.Background())
			if err != nil {
				return nil
			}
			var out []simserver.Trainer
			for _, c := range clients {
				out = append(out, simserver.Trainer{Profile: tr, Key: trKey, Pct: int(c.ActiveThreadPct)})
			}
			return out
		}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL + "/metrics"
}

// The load on the simulated server doubles: the guard throttles the lease,
// the launcher restarts its workers at the new percentage and registers
// them, and its lease lives on past the deadline, at the lower
// percentage, with no revoke.
func TestLoadDoublesThrottleHonoured(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-doubles", p99AtRate(t, 100, 4)/0.9*1.05) // a job at 100 % fits at 4 req/s, just
	cfg.Services[0].RateRPS = 4
	cfg.Admission.Guard.Deadline = 3 * time.Second
	cfg.Admission.Guard.GrantBeforeMeasured = true // a grant in full, as the prediction allows: the load is what is tested
	s := start(t, cfg, Options{})
	arrivals := simserver.Poisson(4, 10*time.Second, 1)
	for _, a := range simserver.Poisson(8, 10*time.Minute, 2) {
		arrivals = append(arrivals, 10*time.Second+a)
	}
	// Scrapes every 5 s (the default): the forecast 30 s ahead is six
	// intervals of trend. At 1 s it would be thirty, and the noise of a
	// one-second rate would swamp it.
	s.Sidecar.watched.set([]configs.Service{{Name: "v100-infer", Metrics: observe.Endpoint{URL: simulatedServer(t, s, arrivals), Preset: "vllm", Window: 20 * time.Second}}})
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d, sub := runningJob(ctx, t, c, s.ID(), "job-doubles", 5001)
	// The launcher restarts its workers with each throttle's env and
	// registers them, until the guard has been quiet for longer than a
	// deadline.
	throttles, pid := 0, 5002
	for quiet := time.After(80 * time.Second); ; {
		select {
		case rec := <-sub.C():
			ev := rec.Event
			if ev.Type != v1.EventThrottle {
				t.Fatalf("event %+v, want only throttles while the launcher honours them", ev)
			}
			throttles++
			if ev.Deadline != nil {
				if err := register(ctx, c, s.ID(), d.Lease, pid); err != nil {
					t.Fatal(err)
				}
				pid++
			}
			quiet = time.After(cfg.Admission.Guard.Deadline + 5*time.Second)
		case <-quiet:
			if throttles == 0 {
				t.Fatal("no throttle within 80 s of the load doubling")
			}
			ls := s.adm.Leases()
			if len(ls) != 1 || ls[0].Revoked || ls[0].Pct >= 100 || ls[0].RunningPct != ls[0].Pct {
				t.Errorf("leases %+v, want the lease lowered, its workers at its percentage", ls)
			}
			return
		}
	}
}

// The server's metrics endpoint goes down: status says so, and once the
// last good window is older than three intervals nothing observed is used
// any more: predictions fall back to the configured rate.
func TestMetricsDownFallsBackToTheConfiguredRate(t *testing.T) {
	t.Parallel()
	// Some 40 requests a second against 8 configured, each within 100 ms.
	srv := newMetricsServer(t, 40, func(n float64) string { return vllmPage(n, 50, latencyBound{100, 1}) })
	cfg := watching(t, "gpu-down", 1e6, srv.url)
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	status := func() v1.ServiceStatus {
		st, err := c.Status(ctx, s.ID())
		if err != nil {
			t.Fatal(err)
		}
		return st.Services[0]
	}
	if !eventually(ctx, func() bool { return status().PredictedAtRPS > 30 }) {
		t.Fatalf("never predicted at the observed load: %+v", status())
	}
	srv.down.Store(true)
	var last v1.ServiceStatus
	// Status predicts, then reads the observation: on a busy machine one
	// status can hold a prediction made just before the expiry, so wait
	// for both.
	if !eventually(ctx, func() bool {
		last = status()
		return last.Observed != nil && last.Observed.State == "expired" && last.PredictedAtRPS == 8
	}) {
		t.Fatalf("the observation never expired, or the prediction never went back to the configured rate: %+v", last)
	}
	if last.PredictedAtRPS != 8 || last.Guard != "configured" || !strings.Contains(last.Observed.Reason, "503") {
		t.Errorf("status %+v (observed %+v), want the configured rate, guard configured, and the scrape's failure", last, *last.Observed)
	}
}
