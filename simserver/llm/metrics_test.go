package llm

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/colocd/colocd/observe"
)

// vLLM's default bounds, written out again from vllm/v1/metrics/loggers.py
// so that a change to the package's copies fails here.
var vllmBounds = map[string][]float64{
	"vllm:e2e_request_latency_seconds": {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
		120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0},
	"vllm:time_to_first_token_seconds": {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
		7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0},
	"vllm:inter_token_latency_seconds": {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
		10.0, 20.0, 40.0, 80.0},
	"vllm:iteration_tokens_total": {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384},
}

// replayed is an engine after a short replay: 20 requests, 5 tokens each.
func replayed(t *testing.T, name string) (*Engine, Config) {
	t.Helper()
	cfg := tiny()
	cfg.ModelName = name
	for i := range 20 {
		cfg.Requests = append(cfg.Requests, Request{Arrival: time.Duration(i) * time.Millisecond, PromptTokens: 24, OutputTokens: 5})
	}
	e := newEngine(t, cfg)
	advanceBy(t, e, time.Hour)
	return e, cfg
}

func parsePage(t *testing.T, page string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, page)
	}
	return fams
}

// The page has vLLM's names, labels and exact default bounds.
func TestPageBuckets(t *testing.T) {
	t.Parallel()
	e, _ := replayed(t, `org/model "v2"\`)
	fams := parsePage(t, e.Page())
	for name, want := range vllmBounds {
		f := fams[name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.GetMetric()) != 1 {
			t.Errorf("%s: %v, want one histogram series", name, f)
			continue
		}
		m := f.GetMetric()[0]
		var got []float64
		for _, b := range m.GetHistogram().GetBucket() {
			got = append(got, b.GetUpperBound())
		}
		if !slices.Equal(got, append(slices.Clone(want), math.Inf(1))) {
			t.Errorf("%s: bounds %v, want %v and +Inf", name, got, want)
		}
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["model_name"] != `org/model "v2"\` || labels["engine"] != "0" {
			t.Errorf("%s: labels %v", name, labels)
		}
	}
	want := map[string]float64{"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0, "vllm:kv_cache_usage_perc": 0}
	for name, v := range want {
		if f := fams[name]; f == nil || f.GetType() != dto.MetricType_GAUGE || f.GetMetric()[0].GetGauge().GetValue() != v {
			t.Errorf("%s: %v, want a gauge at %g", name, f, v)
		}
	}
	if got := fams["vllm:generation_tokens_total"].GetMetric()[0].GetCounter().GetValue(); got != 100 {
		t.Errorf("generation tokens %g, want 100", got)
	}
	// Text as vLLM's Python client writes it: whole bounds with ".0".
	for _, line := range []string{`le="1.0"`, `le="0.001"`, `le="7680.0"`, `finished_reason="stop"} 20.0`} {
		if !strings.Contains(e.Page(), line) {
			t.Errorf("page lacks %s", line)
		}
	}
}

// An engine given bounds of its own for the inter-token latency writes
// them, and counts each token in the bucket that holds its latency.
func TestPageTakesItsOwnITLBuckets(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.ITLBuckets = []float64{0.1, 0.11, 0.12, 0.125, 0.13}
	for i := range 20 {
		cfg.Requests = append(cfg.Requests, Request{Arrival: time.Duration(i) * time.Millisecond, PromptTokens: 24, OutputTokens: 5})
	}
	e := newEngine(t, cfg)
	advanceBy(t, e, time.Hour)
	h := parsePage(t, e.Page())["vllm:inter_token_latency_seconds"].GetMetric()[0].GetHistogram()
	var got []float64
	for _, b := range h.GetBucket() {
		got = append(got, b.GetUpperBound())
	}
	if want := append(slices.Clone(cfg.ITLBuckets), math.Inf(1)); !slices.Equal(got, want) {
		t.Errorf("bounds %v, want %v", got, want)
	}
	if h.GetSampleCount() != 20*4 {
		t.Errorf("%d inter-token latencies counted, want 80 (20 requests of 5 tokens)", h.GetSampleCount())
	}
	if last := h.GetBucket()[len(h.GetBucket())-1].GetCumulativeCount(); last != h.GetSampleCount() {
		t.Errorf("+Inf bucket holds %d of %d", last, h.GetSampleCount())
	}
}

// observe reads the page with the vllm preset, as a request service and
// as an engine's steps.
func TestObserveReadsPage(t *testing.T) {
	t.Parallel()
	e, cfg := replayed(t, "tiny")
	p, err := observe.PresetNamed("vllm")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"model_name": "tiny"}
	at := cfg.Start.Add(time.Hour)
	page := []byte(e.Page())
	stats := e.Stats()

	r, err := (&observe.Scraper{URL: "sim", Preset: p, Labels: labels}).Parse(page, at)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 20 || r.Latency == nil || r.Latency.Count != 20 {
		t.Errorf("requests: %+v, want 20 and their latencies", r)
	}
	wantMS := []float64{}
	for _, b := range vllmBounds["vllm:e2e_request_latency_seconds"] {
		wantMS = append(wantMS, b*1000)
	}
	if got := r.Latency.Bounds; !slices.Equal(got, append(wantMS, math.Inf(1))) {
		t.Errorf("latency bounds %v ms", got)
	}

	steps, err := (&observe.Scraper{URL: "sim", Preset: p.Steps, Labels: labels}).Parse(page, at)
	if err != nil {
		t.Fatal(err)
	}
	// One step sample a step; one inter-token sample per token after each
	// request's first.
	if steps.Requests != float64(stats.Steps) || steps.Latency.Count != 20*4 {
		t.Errorf("steps: %g counted (want %d), %g inter-token samples (want 80)", steps.Requests, stats.Steps, steps.Latency.Count)
	}
	if _, err := (&observe.Scraper{URL: "sim", Preset: p, Labels: map[string]string{"model_name": "other"}}).Parse(page, at); err == nil {
		t.Error("another model's label read the page")
	}
}

// Mid-replay the gauges show the queues and the cache in use.
func TestPageGauges(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Scheduler.MaxNumSeqs = 2
	cfg.Scheduler.MaxNumBatchedTokens = 2
	for range 5 {
		cfg.Requests = append(cfg.Requests, Request{PromptTokens: 1, OutputTokens: 50})
	}
	e := newEngine(t, cfg)
	advanceBy(t, e, 20*time.Millisecond)
	fams := parsePage(t, e.Page())
	gauge := func(name string) float64 { return fams[name].GetMetric()[0].GetGauge().GetValue() }
	// Two running hold a block each of the 64.
	if gauge("vllm:num_requests_running") != 2 || gauge("vllm:num_requests_waiting") != 3 || gauge("vllm:kv_cache_usage_perc") != 2.0/64 {
		t.Errorf("running %g, waiting %g, KV %g; want 2, 3, 1/32", gauge("vllm:num_requests_running"),
			gauge("vllm:num_requests_waiting"), gauge("vllm:kv_cache_usage_perc"))
	}
}

// ServeHTTP advances to the time of the request and serves the page.
func TestServeHTTP(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	cfg.Start = time.Now().Add(-time.Hour)
	cfg.Requests = []Request{{PromptTokens: 8, OutputTokens: 2}}
	e := newEngine(t, cfg)
	srv := httptest.NewServer(e)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	fams := parsePage(t, string(body))
	if got := fams["vllm:e2e_request_latency_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); got != 1 {
		t.Errorf("%d requests finished, want 1", got)
	}
}

func TestPyFloat(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0.0", 1: "1.0", 0.3: "0.3", 2560: "2560.0", 1e6: "1000000.0", 1.5e-5: "1.5e-05",
		12.25: "12.25", math.Inf(1): "+Inf"} {
		if got := pyFloat(v); got != want {
			t.Errorf("pyFloat(%g) = %q, want %q", v, got, want)
		}
	}
}
