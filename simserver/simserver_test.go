package simserver

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/observe"
)

const azureTrace = "../testdata/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv"

// The real trace, read as simserve reads --trace: 19,366 requests over
// about an hour, 0.6 to 8.5 a second per minute (its README).
func TestParseAzureTrace(t *testing.T) {
	t.Parallel()
	arr, err := Arrivals(azureTrace, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(arr) != 19366 {
		t.Errorf("%d requests, want 19366", len(arr))
	}
	lo, hi := math.Inf(1), 0.0
	for _, r := range RatePerMinute(arr) { // minutes from the first request; the last is partial
		lo, hi = min(lo, r), max(hi, r)
	}
	if math.Abs(lo-0.6) > 0.06 || math.Abs(hi-8.5) > 0.06 {
		t.Errorf("per-minute rates from %.2f to %.2f, want 0.6 to 8.5", lo, hi)
	}
}

// inProcess is a transport that hands each request to a handler: the
// scraper reads the server's page as from the network.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// Each preset's page reads back, through colocd's own scraper, as the
// requests the server completed, with a p99 near the predicted one (times
// the error factor).
func TestPagesReadBackThroughTheScraper(t *testing.T) {
	t.Parallel()
	m := testModel(t)
	want, err := m.Latency(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, preset := range []string{"vllm", "sglang", "tgi"} {
		for _, factor := range []float64{1, 1.5} {
			start := time.Unix(1_000_000, 0)
			srv, err := New(Config{Preset: preset, ModelName: "m", Arrivals: Poisson(8, 10*time.Minute, 7), Start: start,
				Latency: m, Trainers: func() []Trainer { return nil }, ErrorFactor: factor, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			p, err := observe.PresetNamed(preset)
			if err != nil {
				t.Fatal(err)
			}
			sc := &observe.Scraper{URL: "http://sim/metrics", Preset: p, Labels: map[string]string{}, Client: &http.Client{Transport: inProcess{srv}}}
			w := observe.Window{Span: time.Hour}
			for _, at := range []time.Duration{time.Minute, 10 * time.Minute} {
				if err := srv.Advance(start.Add(at)); err != nil {
					t.Fatal(err)
				}
				r, err := sc.Parse([]byte(srv.Page()), start.Add(at))
				if err != nil {
					t.Fatalf("%s: %v\n%s", preset, err, srv.Page())
				}
				w.Add(r)
			}
			st, ok := w.Stats()
			if !ok {
				t.Fatalf("%s: no stats", preset)
			}
			if math.Abs(st.RateRPS-8) > 0.8 {
				t.Errorf("%s: rate %.2f, want about 8", preset, st.RateRPS)
			}
			if got := st.P99MS / (want.P99 * factor); got < 0.8 || got > 1.25 {
				t.Errorf("%s ×%g: observed p99 %.1f ms, predicted %.1f × %g", preset, factor, st.P99MS, want.P99, factor)
			}
			// And over HTTP, as a scrape sees it.
			if _, err := sc.Scrape(context.Background()); err != nil {
				t.Errorf("%s: scrape: %v", preset, err)
			}
		}
	}
}

func TestNewRefusesTriton(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Preset: "triton", Latency: testModel(t), Trainers: func() []Trainer { return nil }})
	if err == nil || !strings.Contains(err.Error(), "no latency histogram") {
		t.Fatalf("err = %v", err)
	}
}

// A model name with characters the text format escapes, or that are not
// UTF-8, still makes a page Prometheus' parser reads.
func TestPageEscapesTheModelName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"llama\t3", "bad\xffutf8", "a\"b\\c\nd"} {
		srv, err := New(Config{Preset: "vllm", ModelName: name, Arrivals: Poisson(8, time.Minute, 1), Start: time.Unix(0, 0),
			Latency: testModel(t), Trainers: func() []Trainer { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Advance(time.Unix(60, 0)); err != nil {
			t.Fatal(err)
		}
		p, _ := observe.PresetNamed("vllm")
		if _, err := (&observe.Scraper{Preset: p}).Parse([]byte(srv.Page()), time.Unix(60, 0)); err != nil {
			t.Errorf("model %q: %v\n%s", name, err, srv.Page())
		}
	}
}
