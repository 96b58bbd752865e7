package observe

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// vllmStepPage is vLLM's step metrics after n engine steps: the
// tokens-per-step histogram (its count is the steps) and the inter-token
// latency histogram (one sample per token; 32 tokens a step).
func vllmStepPage(n float64) string {
	const model = `model_name="meta-llama/Llama-3.1-8B-Instruct"`
	var b strings.Builder
	writeFamily(&b, "vllm:iteration_tokens_total", "histogram", "Histogram of number of tokens per engine_step.")
	writeBuckets(&b, "vllm:iteration_tokens_total_bucket{engine=\"0\",le=%q,"+model+"} %.1f\n", n,
		[]string{"1.0", "8.0", "32.0", "+Inf"}, 0, 0.1, 1, 1)
	fmt.Fprintf(&b, "vllm:iteration_tokens_total_count{engine=\"0\",%s} %.1f\n", model, n)
	fmt.Fprintf(&b, "vllm:iteration_tokens_total_sum{engine=\"0\",%s} %.1f\n", model, 30*n)
	writeFamily(&b, "vllm:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds.")
	writeBuckets(&b, "vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=%q,"+model+"} %.1f\n", 32*n,
		[]string{"0.01", "0.025", "0.05", "+Inf"}, 0, 0.5, 1, 1)
	fmt.Fprintf(&b, "vllm:inter_token_latency_seconds_count{engine=\"0\",%s} %.1f\n", model, 32*n)
	fmt.Fprintf(&b, "vllm:inter_token_latency_seconds_sum{engine=\"0\",%s} %g\n", model, 32*n*0.026)
	return b.String() + vllmPage(n/100)
}

// tgiStepPage is TGI's forward-pass histogram after n decode steps (and as
// many prefills, which are not steps of the decode loop).
func tgiStepPage(n float64) string {
	var b strings.Builder
	writeFamily(&b, "tgi_batch_forward_duration", "histogram", "Batch forward duration per method (prefill or decode)")
	for _, method := range []string{"prefill", "decode"} {
		scale := map[string]float64{"prefill": 10, "decode": 1}[method]
		writeBuckets(&b, "tgi_batch_forward_duration_bucket{method=\""+method+"\",le=%q} %.0f\n", n,
			[]string{fmt.Sprint(0.01 * scale), fmt.Sprint(0.02 * scale), fmt.Sprint(0.04 * scale), "+Inf"}, 0, 0.5, 1, 1)
		fmt.Fprintf(&b, "tgi_batch_forward_duration_sum{method=%q} %g\ntgi_batch_forward_duration_count{method=%q} %.0f\n", method, 0.02*scale*n, method, n)
	}
	return b.String() + tgiPage(n/100)
}

// An engine's observer counts its steps and reads its step latency: 1,000
// more steps in 10 s are 100 steps/s, and the percentiles are the step
// histogram's, not the requests'.
func TestStepPresets(t *testing.T) {
	t.Parallel()
	tests := []presetCase{
		// half ≤ 25 ms, all ≤ 50 ms: p50 = 25, p99 = 25 + 25·0.98.
		{"vllm", vllmStepPage, map[string]string{"model_name": "meta-llama/Llama-3.1-8B-Instruct"}, 25, 25 + 25*0.98, 0},
		// decode: half ≤ 20 ms, all ≤ 40 ms.
		{"tgi", tgiStepPage, nil, 20, 20 + 20*0.98, 0},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			obs, err := Endpoint{URL: "http://x/metrics", Preset: tt.preset, Steps: true}.Observer(nil)
			if err != nil {
				t.Fatal(err)
			}
			p := obs.src.(*Scraper).Preset
			s := scrapePages(t, p, tt.labels, tt.page(1000), tt.page(2000))
			wantNear(t, figure{"step rate", s.RateRPS, 100}, figure{"p50", s.P50MS, tt.p50}, figure{"p99", s.P99MS, tt.p99})
		})
	}
}

// A preset with no step counter cannot observe an engine, and says which can.
func TestStepPresetMissing(t *testing.T) {
	t.Parallel()
	_, err := Endpoint{URL: "http://x/metrics", Preset: "triton", Steps: true}.Observer(nil)
	if err == nil || !strings.Contains(err.Error(), "[tgi vllm generic]") {
		t.Errorf("err = %v, want one naming [tgi vllm generic]", err)
	}
	if got := StepPresets(); strings.Join(got, ",") != "tgi,vllm,generic" {
		t.Errorf("StepPresets() = %v", got)
	}
}

// Before TGI's first decode step there are only prefill series: that is
// no step yet, not a wrong metric name.
func TestTGIStepsBeforeTheFirstDecode(t *testing.T) {
	t.Parallel()
	tgi, _ := PresetNamed("tgi")
	srv, url := startServer(t)
	page := strings.ReplaceAll(tgiStepPage(100), `method="decode"`, `method="prefill"`)
	srv.set(page)
	r, err := (&Scraper{URL: url, Preset: tgi.Steps}).Scrape(t.Context())
	if err != nil || r.Requests != 0 {
		t.Errorf("got %v steps, %v; want 0 and no error", r.Requests, err)
	}
	// With labels of the user's own, a mismatch is still an error.
	if _, err := (&Scraper{URL: url, Preset: tgi.Steps, Labels: map[string]string{"model": "x"}}).Scrape(t.Context()); err == nil {
		t.Error("a label of the user's that matches nothing: want an error")
	}
}

// The p99's sureness counts steps, not the tokens vLLM's inter-token
// histogram counts (32 a step): all of a step's tokens take its time.
func TestStepSurenessCountsSteps(t *testing.T) {
	t.Parallel()
	p, _ := PresetNamed("vllm")
	srv, url := startServer(t)
	labels := map[string]string{"model_name": "meta-llama/Llama-3.1-8B-Instruct"}
	s := scrapeWindow(t, &Scraper{URL: url, Preset: p.Steps, Labels: labels}, srv, vllmStepPage(1000), vllmStepPage(1010))
	// 10 steps: sureQuantile(10) is 0.99 − 1.645·√(0.0099/10) ≈ 0.938, in
	// the 25–50 ms bucket that holds the upper half.
	want := 25 + 25*(sureQuantile(10)-0.5)/0.5
	if math.Abs(s.P99SureMS-want) > 1e-9 {
		t.Errorf("P99SureMS = %g, want %g (n = 10 steps, not 320 tokens)", s.P99SureMS, want)
	}
}
