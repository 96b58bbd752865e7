package sidecar

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/observe"
	"github.com/nats-io/nats.go/jetstream"
)

// leased admits req on the sidecar id and fails the test unless the
// decision carries a lease.
func leased(ctx context.Context, t testing.TB, c *bus.Client, id string, req *v1.AdmitRequest) *v1.Decision {
	t.Helper()
	d, err := c.Admit(ctx, id, req)
	if err != nil || d.Lease == nil {
		t.Fatalf("admit %s: %v %+v", req.Job.ID, err, d)
	}
	return d
}

// leasedInFull is leased, and fails the test unless the lease is at 100 %.
func leasedInFull(ctx context.Context, t testing.TB, c *bus.Client, id string, req *v1.AdmitRequest) *v1.Decision {
	t.Helper()
	d := leased(ctx, t, c, id, req)
	if d.Lease.ActiveThreadPct != 100 {
		t.Fatalf("admit %s: %+v, want a grant at 100 %%", req.Job.ID, d)
	}
	return d
}

// runningJob takes a lease at 100 % for job, registers pid as its worker,
// and subscribes to the job's events from then on.
func runningJob(ctx context.Context, t *testing.T, c *bus.Client, id, job string, pid int) (*v1.Decision, *bus.EventSubscription) {
	t.Helper()
	d := leasedInFull(ctx, t, c, id, admitReq(job, 10, 100))
	if err := register(ctx, c, id, d.Lease, pid); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Events(ctx, id, job, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Stop() })
	return d, sub
}

// leaseBucket is the sidecar's lease bucket, opened with its own identity
// (launchers may not read it).
func leaseBucket(ctx context.Context, t testing.TB, s *running) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(sidecarConn(t, s))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, v1.LeaseBucketName(s.ID()))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// watching is testConfig with the service's metrics endpoint at url, a
// vLLM server scraped every second.
func watching(t testing.TB, id string, sloMS float64, url string) *configs.Config {
	t.Helper()
	cfg := testConfig(t, id, sloMS)
	cfg.Services[0].Metrics = observe.Endpoint{URL: url, Preset: "vllm", Interval: time.Second}
	return cfg
}

// register registers pids as the workers of lease l on the sidecar id.
func register(ctx context.Context, c *bus.Client, id string, l *v1.Lease, pids ...int) error {
	return c.Register(ctx, id, &v1.RegisterRequest{LeaseID: l.ID, Token: l.Token, PIDs: pids})
}

// latencyBound is a bucket of a latency histogram: the share of the
// requests that took up to ms.
type latencyBound struct{ ms, share float64 }

// vllmPage writes the metrics page of a vLLM server (label order and
// number format as vLLM writes them) on which n requests have completed,
// meanMS each on average, the share of them within each bound as given.
func vllmPage(n, meanMS float64, bounds ...latencyBound) string {
	const labels = `engine="0",`
	const model = `model_name="m"`
	var b strings.Builder
	b.WriteString("# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.\n")
	b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n")
	for _, bd := range append(bounds, latencyBound{0, 1}) {
		le := "+Inf"
		if bd.ms > 0 {
			le = fmt.Sprint(bd.ms / 1000)
		}
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{%sle=%q,%s} %.1f\n", labels, le, model, bd.share*n)
	}
	fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{%s%s} %.1f\n", labels, model, n)
	fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_sum{%s%s} %g\n", labels, model, n*meanMS/1000)
	b.WriteString("# HELP vllm:request_success_total Count of successfully processed requests.\n")
	b.WriteString("# TYPE vllm:request_success_total counter\n")
	fmt.Fprintf(&b, "vllm:request_success_total{%sfinished_reason=\"stop\",%s} %.1f\n", labels, model, n)
	return b.String()
}

// metricsServer is an inference server's metrics endpoint: at every
// scrape, step more requests have completed, and page is the page for all
// so far; each scrape's number goes on scrapes (when there is room), and
// while down is set the server answers 503.
type metricsServer struct {
	url     string
	scrapes chan int
	down    atomic.Bool
	mu      sync.Mutex
	step    float64
}

func newMetricsServer(t *testing.T, step float64, page func(n float64) string) *metricsServer {
	t.Helper()
	m := &metricsServer{scrapes: make(chan int, 100), step: step}
	scrapes, requests := 0, 0.0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.down.Load() {
			http.Error(w, "server restarting", http.StatusServiceUnavailable)
			return
		}
		m.mu.Lock()
		scrapes++
		requests += m.step
		k, n := scrapes, requests
		m.mu.Unlock()
		fmt.Fprint(w, page(n))
		select {
		case m.scrapes <- k:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	m.url = srv.URL + "/metrics"
	return m
}

// setStep changes how many requests complete between two scrapes.
func (m *metricsServer) setStep(v float64) {
	m.mu.Lock()
	m.step = v
	m.mu.Unlock()
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
