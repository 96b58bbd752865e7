package observe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/fieldtest"
)

// The pages below follow each server's exposition exactly as its source
// writes it (label order, number format, line order; docs/observe.md):
// n requests so far, of which 40 % took up to 1 s, 80 % up to 2.5 s and all
// up to 5 s, summing to 1.7 s each on average.

func vllmPage(n float64) string {
	const m = `engine="0",`
	const model = `model_name="meta-llama/Llama-3.1-8B-Instruct"`
	var b strings.Builder
	writeFamily(&b, "vllm:e2e_request_latency_seconds", "histogram", "Histogram of e2e request latency in seconds.")
	writeBuckets(&b, "vllm:e2e_request_latency_seconds_bucket{"+m+"le=%q,"+model+"} %.1f\n", n,
		[]string{"0.3", "0.5", "1.0", "2.5", "5.0", "+Inf"}, 0, 0, 0.4, 0.8, 1, 1)
	fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{%s%s} %.1f\n", m, model, n)
	fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_sum{%s%s} %g\n", m, model, 1.7*n)
	writeFamily(&b, "vllm:request_success_total", "counter", "Count of successfully processed requests.")
	fmt.Fprintf(&b, "vllm:request_success_total{%sfinished_reason=\"stop\",%s} %.1f\n", m, model, 0.8*n)
	fmt.Fprintf(&b, "vllm:request_success_total{%sfinished_reason=\"length\",%s} %.1f\n", m, model, 0.2*n)
	fmt.Fprintf(&b, "vllm:request_success_total{%sfinished_reason=\"abort\",%s} 0.0\n", m, model)
	return b.String()
}

func sglangPage(n float64) string {
	const l = `engine_type="unified",`
	const model = `model_name="meta-llama/Llama-3.1-8B-Instruct"`
	var b strings.Builder
	writeFamily(&b, "sglang:e2e_request_latency_seconds", "histogram", "Histogram of End-to-end request latency in seconds")
	fmt.Fprintf(&b, "sglang:e2e_request_latency_seconds_sum{%s%s} %g\n", l, model, 1.7*n)
	writeBuckets(&b, "sglang:e2e_request_latency_seconds_bucket{"+l+"le=%q,"+model+"} %.1f\n", n,
		[]string{"0.6", "1.0", "2.0", "4.0", "6.0", "+Inf"}, 0, 0.4, 0.6, 0.9, 1, 1)
	fmt.Fprintf(&b, "sglang:e2e_request_latency_seconds_count{%s%s} %.1f\n", l, model, n)
	writeFamily(&b, "sglang:num_requests_total", "counter", "Number of requests processed.")
	fmt.Fprintf(&b, "sglang:num_requests_total{%s%s} %.1f\n", l, model, n)
	return b.String()
}

// writeFamily writes the HELP and TYPE lines that open a metric family.
func writeFamily(b *strings.Builder, name, kind, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}

// writeBuckets writes one bucket line per bound, with its fraction of n
// requests as the count.
func writeBuckets(b *strings.Builder, line string, n float64, les []string, fracs ...float64) {
	for i, le := range les {
		fmt.Fprintf(b, line, le, fracs[i]*n)
	}
}

func tgiPage(n float64) string {
	var b strings.Builder
	writeFamily(&b, "tgi_request_success", "counter", "Number of successful requests")
	fmt.Fprintf(&b, "tgi_request_success %d\n\n", int(n))
	writeFamily(&b, "tgi_request_count", "counter", "Total number of requests")
	fmt.Fprintf(&b, "tgi_request_count %d\n\n", int(n))
	writeFamily(&b, "tgi_request_duration", "histogram", "Request duration")
	for _, bk := range []struct {
		le   string
		frac float64
	}{{"0.49878850951194753", 0}, {"1.122274146401882", 0.4}, {"2.5251168294042348", 0.8}, {"5.681512866159528", 1}, {"+Inf", 1}} {
		fmt.Fprintf(&b, "tgi_request_duration_bucket{le=%q} %d\n", bk.le, int(bk.frac*n))
	}
	fmt.Fprintf(&b, "tgi_request_duration_sum %g\ntgi_request_duration_count %d\n\n", 1.7*n, int(n))
	return b.String()
}

func tritonPage(n float64) string {
	var b strings.Builder
	writeFamily(&b, "nv_inference_request_success", "counter", "Number of successful inference requests, all batch sizes")
	fmt.Fprintf(&b, "nv_inference_request_success{model=\"resnet50\",version=\"1\"} %d\n", int(n))
	fmt.Fprintf(&b, "nv_inference_request_success{model=\"bert\",version=\"2\"} %d\n", int(n/10))
	writeFamily(&b, "nv_inference_request_duration_us", "counter", "Cumulative inference request duration in microseconds (includes cached requests)")
	fmt.Fprintf(&b, "nv_inference_request_duration_us{model=\"resnet50\",version=\"1\"} %d\n", int(1.7e6*n))
	fmt.Fprintf(&b, "nv_inference_request_duration_us{model=\"bert\",version=\"2\"} %d\n", int(9e6*n/10))
	writeFamily(&b, "nv_inference_request_summary_us", "summary", "Summary of inference request duration in microseconds (includes cached requests)")
	fmt.Fprintf(&b, "nv_inference_request_summary_us_count{model=\"resnet50\",version=\"1\"} %d\n", int(n))
	fmt.Fprintf(&b, "nv_inference_request_summary_us_sum{model=\"resnet50\",version=\"1\"} %d\n", int(1.7e6*n))
	b.WriteString("nv_inference_request_summary_us{model=\"resnet50\",version=\"1\",quantile=\"0.5\"} 1300000\n")
	b.WriteString("nv_inference_request_summary_us{model=\"resnet50\",version=\"1\",quantile=\"0.99\"} 4000000\n")
	return b.String()
}

// server serves whatever page the test sets.
type server struct {
	mu   sync.Mutex
	page string
	code int
}

func (s *server) set(page string) {
	s.mu.Lock()
	s.page, s.code = page, http.StatusOK
	s.mu.Unlock()
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	page, code := s.page, s.code
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(code)
	_, _ = strings.NewReader(page).WriteTo(w)
}

func startServer(t *testing.T) (*server, string) {
	t.Helper()
	s := &server{code: http.StatusOK}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL + "/metrics"
}

// scrapeWindow scrapes each page in turn, 10 s apart by the readings'
// clocks, and returns the window's stats.
func scrapeWindow(t *testing.T, sc *Scraper, srv *server, pages ...string) Stats {
	t.Helper()
	w := Window{Span: time.Minute}
	for i, p := range pages {
		srv.set(p)
		r, err := sc.Scrape(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		r.At = t0.Add(time.Duration(i) * 10 * time.Second)
		w.Add(r)
	}
	s, ok := w.Stats()
	if !ok {
		t.Fatal("no stats")
	}
	return s
}

// scrapePages serves each page in turn to a Scraper with p and labels
// and returns the window's stats, as scrapeWindow does.
func scrapePages(t *testing.T, p *Preset, labels map[string]string, pages ...string) Stats {
	t.Helper()
	srv, url := startServer(t)
	return scrapeWindow(t, &Scraper{URL: url, Preset: p, Labels: labels}, srv, pages...)
}

// figure is one number a test read, and what it wants.
type figure struct {
	name      string
	got, want float64
}

// wantNear fails t for each figure more than a millionth off what it
// wants.
func wantNear(t *testing.T, figures ...figure) {
	t.Helper()
	for _, f := range figures {
		if math.Abs(f.got-f.want) > 1e-6*f.want {
			t.Errorf("%s = %g, want %g", f.name, f.got, f.want)
		}
	}
}

// presetCase is a server's page under a preset (n requests or steps so
// far), and the percentiles a window of two of its pages reads.
type presetCase struct {
	preset   string
	page     func(n float64) string
	labels   map[string]string
	p50, p99 float64 // ms
	mean     float64 // ms; a step preset's is not checked
}

// TestPresets: each server's own page, read twice 10 s apart with 100 more
// requests, gives 10 req/s, and percentiles interpolated in its buckets.
func TestPresets(t *testing.T) {
	t.Parallel()
	tests := []presetCase{
		// 40 % ≤ 1 s, 80 % ≤ 2.5 s: p50 = 1 + 1.5·(0.1/0.4), p99 = 2.5 + 2.5·(0.19/0.2).
		{"vllm", vllmPage, map[string]string{"model_name": "meta-llama/Llama-3.1-8B-Instruct"}, 1375, 4875, 1700},
		{"sglang", sglangPage, nil, 1000 + 1000*(0.1/0.2), 4000 + 2000*(0.09/0.1), 1700},
		{"tgi", tgiPage, nil, 1122.274146401882 + (2525.1168294042348-1122.274146401882)*0.25,
			2525.1168294042348 + (5681.512866159528-2525.1168294042348)*0.95, 1700},
		{"triton", tritonPage, map[string]string{"model": "resnet50"}, 1300, 4000, 1700},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			p, err := PresetNamed(tt.preset)
			if err != nil {
				t.Fatal(err)
			}
			s := scrapePages(t, p, tt.labels, tt.page(100), tt.page(200))
			wantNear(t, figure{"rate", s.RateRPS, 10}, figure{"p50", s.P50MS, tt.p50}, figure{"p99", s.P99MS, tt.p99}, figure{"mean", s.MeanMS, tt.mean})
		})
	}
}

// TestScrapeFaults: a restart, a missing series, NaN, an oversized page
// and a failing server each end as the window or the error says.
func TestScrapeFaults(t *testing.T) {
	t.Parallel()
	vllm, _ := PresetNamed("vllm")
	srv, url := startServer(t)
	sc := &Scraper{URL: url, Preset: vllm}
	if s := scrapeWindow(t, sc, srv, vllmPage(100), vllmPage(200), vllmPage(50)); s.Requests != 150 {
		t.Errorf("across a restart: %g requests, want 100 + 50", s.Requests)
	}
	noHistogram := vllmPage(10)[strings.Index(vllmPage(10), "# HELP vllm:request_success_total"):]
	tests := []struct {
		name, page string
		want       error
	}{
		{"missing series", noHistogram, ErrMissingSeries},
		{"NaN counter", strings.Replace(vllmPage(10), `finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.0`, `finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"} NaN`, 1), ErrBadValue},
		{"10 MB page", vllmPage(10) + strings.Repeat("# padding padding padding padding\n", 300_000), ErrTooLarge},
	}
	for _, tt := range tests {
		srv.set(tt.page)
		if _, err := sc.Scrape(context.Background()); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	srv.set(vllmPage(10))
	if _, err := (&Scraper{URL: url, Preset: vllm, Labels: map[string]string{"model_name": "other"}}).Scrape(context.Background()); !errors.Is(err, ErrMissingSeries) {
		t.Errorf("a label filter that matches nothing: %v", err)
	}
	srv.mu.Lock()
	srv.code = http.StatusInternalServerError
	srv.mu.Unlock()
	if _, err := sc.Scrape(context.Background()); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("a failing server: %v", err)
	}
}

// TestTGIBeforeTheFirstRequest: TGI creates its series on first use, so a
// page without them is zero requests, not an error.
func TestTGIBeforeTheFirstRequest(t *testing.T) {
	t.Parallel()
	tgi, _ := PresetNamed("tgi")
	srv, url := startServer(t)
	srv.set("# HELP tgi_queue_size Current queue size\n# TYPE tgi_queue_size gauge\ntgi_queue_size 0\n")
	r, err := (&Scraper{URL: url, Preset: tgi}).Scrape(context.Background())
	if err != nil || r.Requests != 0 || r.Latency != nil {
		t.Errorf("got %+v, %v", r, err)
	}
}

func TestGenericPreset(t *testing.T) {
	t.Parallel()
	if _, err := Generic("", "x"); err == nil {
		t.Error("a generic preset without a histogram")
	}
	p, err := Generic("request_latency_seconds", "requests_total")
	if err != nil || p.Unit != 1000 {
		t.Fatalf("%+v, %v", p, err)
	}
	if _, err := PresetNamed("ollama"); err == nil || !strings.Contains(err.Error(), "vllm") {
		t.Errorf("an unknown preset: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{vllmPage(5), sglangPage(5), tgiPage(5), tritonPage(5), "x 1\n", "# TYPE a histogram\na_bucket{le=\"1\"} 2\na_bucket{le=\"0.5\"} 3\n"} {
		f.Add([]byte(p))
	}
	vllm, _ := PresetNamed("vllm")
	f.Fuzz(func(t *testing.T, page []byte) {
		r, err := (&Scraper{Preset: vllm}).Parse(page, t0)
		if err != nil {
			return
		}
		if math.IsNaN(r.Requests) || r.Requests < 0 {
			t.Fatalf("accepted requests %g", r.Requests)
		}
		if h := r.Latency; h != nil {
			for i := 1; i < len(h.Counts); i++ {
				if h.Counts[i] < h.Counts[i-1] {
					t.Fatalf("accepted buckets that are not cumulative: %v", h.Counts)
				}
			}
		}
	})
}

func TestEndpointValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		e    Endpoint
		want []string // paths
	}{
		{"valid preset", Endpoint{URL: "http://127.0.0.1:8000/metrics", Preset: "vllm", Interval: 5 * time.Second, Labels: map[string]string{"model_name": "m"}}, nil},
		{"valid generic", Endpoint{URL: "https://infer:9000/metrics", Preset: "generic", Histogram: "lat_seconds", Counter: "req_total"}, nil},
		{"everything wrong", Endpoint{URL: "file:///etc/passwd", Preset: "ollama", Interval: time.Millisecond, Labels: map[string]string{"bad-name": "x"}},
			[]string{"m.url", "m.preset", "m.interval", "m.labels.bad-name"}},
		{"generic without names", Endpoint{URL: "http://h/metrics", Preset: "generic"}, []string{"m.histogram"}},
		{"preset with names", Endpoint{URL: "http://h/metrics", Preset: "tgi", Counter: "x"}, []string{"m.histogram"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fieldtest.WantPaths(t, tt.e.Validate("m"), tt.want...)
		})
	}
}

// TestScrapeOfAHangingServer: a server that never finishes its page costs
// a scrape no more than the context allows.
func TestScrapeOfAHangingServer(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("# TYPE vllm:request_success_total counter\n"))
		w.(http.Flusher).Flush()
		select { // a page that never ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hs.Close()
	defer close(release)
	vllm, _ := PresetNamed("vllm")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := (&Scraper{URL: hs.URL, Preset: vllm}).Scrape(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the context's deadline", err)
	}
}
