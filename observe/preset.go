package observe

import (
	"fmt"
	"slices"
	"sort"
)

// Preset names the metrics one server exports.
type Preset struct {
	Name string
	// Requests is the counter of requests (completed or, where the server
	// counts them so, arrived).
	Requests string
	// Histogram is the end-to-end latency histogram's family name.
	Histogram string
	// DurationSum is a cumulative latency counter (Triton), read with
	// Requests as its count when there is no histogram.
	DurationSum string
	// Summary is an optional latency summary with quantiles.
	Summary string
	// Unit converts the latency metrics' unit to ms (1000 for seconds).
	Unit float64
	// ModelLabel is the label that names the model, for a label filter
	// ("" where the server serves one model and labels nothing).
	ModelLabel string
	// AbsentIsZero: the server creates a series only when it first counts
	// (TGI), so an absent one means nothing counted yet, not a wrong name.
	AbsentIsZero bool
	// CountOf says Requests names a histogram whose sample count is the
	// counter (vLLM counts engine steps only so).
	CountOf bool
	// Labels are series labels the preset always selects (TGI's decode
	// steps), on top of the user's.
	Labels map[string]string
	// Steps is the view of an LLM engine's steps, where the server exports
	// one: Requests counts engine steps and Histogram is the step (or
	// inter-token) latency. Nil where the server has no step counter.
	Steps *Preset
}

// The presets, by name. Where each name comes from is in docs/observe.md.
var presets = map[string]*Preset{
	// vLLM (vllm/v1/metrics/loggers.py): every finished request, one
	// series per finish reason, and the arrival-to-finish histogram.
	// Its steps: the tokens-per-step histogram counts engine steps, and
	// the inter-token latency histogram times them, token by token.
	"vllm": {Name: "vllm", Requests: "vllm:request_success_total", Histogram: "vllm:e2e_request_latency_seconds",
		Unit: 1000, ModelLabel: "model_name",
		Steps: &Preset{Name: "vllm steps", Requests: "vllm:iteration_tokens_total", CountOf: true,
			Histogram: "vllm:inter_token_latency_seconds", Unit: 1000, ModelLabel: "model_name"}},
	// SGLang (python/sglang/srt/metrics/collector.py; --enable-metrics).
	"sglang": {Name: "sglang", Requests: "sglang:num_requests_total", Histogram: "sglang:e2e_request_latency_seconds",
		Unit: 1000, ModelLabel: "model_name"},
	// TGI (router/src/server.rs): requests counted at arrival, the
	// handler's duration histogram in seconds, no labels, no _total or
	// _seconds suffixes, series created on first use.
	// Its steps: the forward pass histogram of the decode method, one
	// sample per decode step.
	"tgi": {Name: "tgi", Requests: "tgi_request_count", Histogram: "tgi_request_duration", Unit: 1000, AbsentIsZero: true,
		Steps: &Preset{Name: "tgi steps", Requests: "tgi_batch_forward_duration", CountOf: true, Histogram: "tgi_batch_forward_duration",
			Unit: 1000, AbsentIsZero: true, Labels: map[string]string{"method": "decode"}}},
	// Triton (src/metrics.cc in triton-inference-server/core): no latency
	// histogram; the cumulative duration of successful requests in µs
	// gives the mean, and the summary (summary_latencies=true) the tail.
	"triton": {Name: "triton", Requests: "nv_inference_request_success", DurationSum: "nv_inference_request_duration_us",
		Summary: "nv_inference_request_summary_us", Unit: 0.001, ModelLabel: "model"},
}

// StepPresets lists the presets that can observe an LLM engine's steps
// (and generic, whose counter and histogram the user names), sorted.
func StepPresets() []string {
	var out []string
	for _, k := range Presets() {
		if presets[k].Steps != nil {
			out = append(out, k)
		}
	}
	return append(out, "generic")
}

// Presets lists the preset names, sorted.
func Presets() []string {
	out := make([]string, 0, len(presets))
	for k := range presets {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PresetNamed returns the preset of that name.
func PresetNamed(name string) (*Preset, error) {
	p, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("preset: want one of %v or generic, got %q", Presets(), name)
	}
	return p, nil
}

// Generic is the preset of a server that follows Prometheus' conventions
// but none of the presets: a latency histogram in seconds and a request
// counter, by name.
func Generic(histogram, counter string) (*Preset, error) {
	if histogram == "" || counter == "" {
		return nil, fmt.Errorf("generic preset: want a histogram and a counter name, got %q and %q", histogram, counter)
	}
	if slices.Contains(Presets(), histogram) {
		return nil, fmt.Errorf("generic preset: histogram: want a metric name, got the preset name %q", histogram)
	}
	return &Preset{Name: "generic", Requests: counter, Histogram: histogram, Unit: 1000}, nil
}
