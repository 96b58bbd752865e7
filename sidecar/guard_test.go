package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/predictor/calibrate"
)

// slowServer serves a vLLM metrics page on which perScrape requests
// complete between two scrapes, every one with a latency in (lowMS, highMS].
func slowServer(t *testing.T, perScrape, lowMS, highMS float64) string {
	t.Helper()
	var mu sync.Mutex
	req := 0.0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		req += perScrape
		n := req
		mu.Unlock()
		fmt.Fprintf(w, "# TYPE vllm:e2e_request_latency_seconds histogram\n"+
			"vllm:e2e_request_latency_seconds_bucket{le=\"%g\",model_name=\"m\"} 0\n"+
			"vllm:e2e_request_latency_seconds_bucket{le=\"%g\",model_name=\"m\"} %g\n"+
			"vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} %g\n"+
			"vllm:e2e_request_latency_seconds_count{model_name=\"m\"} %g\n"+
			"vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} %g\n"+
			"# TYPE vllm:request_success_total counter\n"+
			"vllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} %g\n",
			lowMS/1000, highMS/1000, n, n, n, n*highMS/1000, n)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// The predictor is off: the server's own p99 is 1.5 to 1.6 times what it
// predicts for the lease that runs, over the limit, while the prediction
// fits with room to spare. The observation, not the prediction, throttles
// the lease; status and /metrics show the correction.
func TestObservedP99ThrottlesWhenThePredictorIsLow(t *testing.T) {
	pred := p99At(t, 100)
	url := slowServer(t, 7, 1.5*pred, 1.6*pred) // 7 requests a second, under the configured 8
	cfg := testConfig(t, "gpu-slow", pred/0.9*1.2)
	cfg.Services[0].Metrics = observe.Endpoint{URL: url, Preset: "vllm", Interval: time.Second, Window: 16 * time.Second}
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d, err := c.Admit(ctx, s.ID(), admitReq("job-slow", 10, 100))
	if err != nil || d.Lease == nil || d.Lease.ActiveThreadPct != 100 {
		t.Fatalf("admit: %v %+v, want a grant at 100 %%", err, d)
	}
	sub, err := c.Events(ctx, s.ID(), "job-slow", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	// The first window that began after the grant and holds 100 requests.
	var ev bus.Event
	select {
	case rec := <-sub.C():
		ev = rec.Event
	case <-ctx.Done():
		t.Fatal("no event within 90 s")
	}
	if ev.Type != bus.EventThrottle || ev.ActiveThreadPct >= 100 || !strings.Contains(ev.Reason, "own p99") {
		t.Fatalf("event %+v, want a throttle for the observed p99", ev)
	}
	st, err := c.Status(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if svc := st.Services[0]; svc.Guard != "corrected" || !(svc.Correction >= 1.5) || !(svc.PredictedP99MS*svc.Correction <= 0.9*svc.SLOP99MS) {
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
	if !eventually(ctx, func() bool { m, _, err = calibrate.FromObservations(dir); return err == nil }) {
		t.Fatalf("no measurement records from %s: %v", dir, err)
	}
	if r := m.Records[0]; r.TrainingPct != 100 || !(r.Measured.LatencyMS["p99"] >= 1.5*pred) || m.Device.Name != "NVIDIA H200" {
		t.Errorf("record %+v on %+v, want the window at 100 %% with its observed p99", r, m.Device)
	}
}
