package llm

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// vLLM's default histogram bounds, exactly as vllm/v1/metrics/loggers.py
// (PrometheusStatLogger) sets them.
var (
	// E2EBuckets bound vllm:e2e_request_latency_seconds, in seconds.
	E2EBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
		120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	// TTFTBuckets bound vllm:time_to_first_token_seconds, in seconds.
	TTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
		10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	// ITLBuckets bound vllm:inter_token_latency_seconds, in seconds.
	ITLBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
		20.0, 40.0, 80.0}
	// IterationTokensBuckets bound vllm:iteration_tokens_total, in tokens.
	IterationTokensBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
)

// histogram is a Prometheus histogram: counts per bucket, not cumulative,
// the last +Inf.
type histogram struct {
	bounds []float64
	counts []uint64
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// observe counts v in the first bucket whose bound is ≥ v.
func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

// metrics are the engine's cumulative figures.
type metrics struct {
	e2e, ttft, itl, iterationTokens histogram
	success, preemptions            float64
	promptTokens, generationTokens  float64
}

func newMetrics(itl []float64) metrics {
	if itl == nil {
		itl = ITLBuckets
	}
	return metrics{e2e: newHistogram(E2EBuckets), ttft: newHistogram(TTFTBuckets), itl: newHistogram(itl),
		iterationTokens: newHistogram(IterationTokensBuckets)}
}

// ServeHTTP advances the engine to the time of the request and serves its
// metrics page.
func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ServePage(w, e, "text/plain; version=0.0.4; charset=utf-8")
}

// Pager is a simulated server whose metrics page is as of its last
// Advance: the Engine, or simserver's Server.
type Pager interface {
	Advance(now time.Time) error
	Page() string
}

// ServePage advances p to now, the time of a request, and serves its page
// as contentType; an error of Advance is a 500.
func ServePage(w http.ResponseWriter, p Pager, contentType string) {
	if err := p.Advance(time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	_, _ = w.Write([]byte(p.Page()))
}

// Page is the metrics page as of the last Advance, in the Prometheus text
// format as vLLM's V1 engine writes it: the same names, help, labels
// (model_name, engine "0") and bucket bounds, for the metrics this model
// has.
func (e *Engine) Page() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	lb := `model_name="` + EscapeLabel(e.cfg.ModelName) + `",engine="0"`
	gauge := func(name, help string, v float64) {
		family(&b, name, help, "gauge")
		sample(&b, name, lb, v)
	}
	counter := func(name, help string, v float64) {
		family(&b, name, help, "counter")
		sample(&b, name, lb, v)
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(len(e.run)))
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(e.waitingNow()))
	usage := 0.0
	if e.total > 0 {
		usage = float64(e.total-e.free) / float64(e.total)
	}
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage)
	counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", e.m.preemptions)
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", e.m.promptTokens)
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.", e.m.generationTokens)
	family(&b, "vllm:request_success_total", "Count of successfully processed requests.", "counter")
	for _, reason := range []string{"stop", "length", "abort"} {
		v := 0.0
		if reason == "stop" {
			v = e.m.success
		}
		sample(&b, "vllm:request_success_total", lb+`,finished_reason="`+reason+`"`, v)
	}
	writeHistogram(&b, "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", lb, &e.m.iterationTokens)
	writeHistogram(&b, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", lb, &e.m.ttft)
	writeHistogram(&b, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", lb, &e.m.itl)
	writeHistogram(&b, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", lb, &e.m.e2e)
	return b.String()
}

func family(b *strings.Builder, name, help, typ string) {
	b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

func sample(b *strings.Builder, name, labels string, v float64) {
	b.WriteString(name + "{" + labels + "} " + pyFloat(v) + "\n")
}

func writeHistogram(b *strings.Builder, name, help, labels string, h *histogram) {
	family(b, name, help, "histogram")
	var cum uint64
	for i, ub := range h.bounds {
		cum += h.counts[i]
		sample(b, name+"_bucket", labels+`,le="`+pyFloat(ub)+`"`, float64(cum))
	}
	sample(b, name+"_bucket", labels+`,le="+Inf"`, float64(h.n))
	sample(b, name+"_count", labels, float64(h.n))
	sample(b, name+"_sum", labels, h.sum)
}

// pyFloat writes v as Python's Prometheus client does: a whole number
// with ".0", others in the shortest form that reads back exactly.
func pyFloat(v float64) string {
	if v != 0 && (math.Abs(v) < 1e-4 || math.Abs(v) >= 1e16) || !finite(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// labelEscaper escapes a label value as the text format has it: backslash,
// double quote and line feed only.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// EscapeLabel is v as a label value of the text format: valid UTF-8 (an
// invalid byte is U+FFFD), escaped.
func EscapeLabel(v string) string { return labelEscaper.Replace(strings.ToValidUTF8(v, "\uFFFD")) }
