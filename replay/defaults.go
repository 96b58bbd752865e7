package replay

import (
	"embed"
	"fmt"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/simserver/llm"
)

// defaults holds the profiles of the default replays: a vLLM decode step,
// a real inference service and a real training step (also
// testdata/profiles/, where the project's tests and examples read them).
//
//go:embed defaults/*.json
var defaults embed.FS

// The default replays' device, and their SLOs.
const (
	DefaultDevice = "NVIDIA H200"
	DefaultSMs    = 132
	// DefaultStepSLOMS is the engine's inter-token latency p99 SLO: the
	// default engine alone shows 40 to 70 ms a minute on the Azure traces
	// (its longest steps carry 2048 prompt tokens), and about 100 ms next
	// to the training job at 30 %.
	DefaultStepSLOMS = 125.0
	// DefaultBatchedTokens is the default engine's token budget per step:
	// what vLLM's tuning guide advises for inter-token latency (a smaller
	// budget, smaller prefill chunks beside the decodes).
	DefaultBatchedTokens = 2048
	// DefaultSLOP99MS is the request service's p99 SLO: at 5.5 req/s a
	// training job fits at about 30 %, at 8.5 at 10 to 20 %.
	DefaultSLOP99MS = 100.0
)

// Default is the replay `colocd replay` runs without a configuration, the
// same for every trace so that two traces compare: an LLM engine
// (simserver/llm's default, a Llama-2-7B-shaped model on an H200, with
// DefaultBatchedTokens a step) serving the trace, configured in colocd as a team would from its own server's
// metrics: a vLLM engine service whose profile is a vLLM decode step, its
// busy fraction and mean burst of steps those the engine shows alone over
// the trace, its SLO DefaultStepSLOMS on the inter-token latency p99; on
// an H200 under MPS (its calibration preset), with the V100 training step
// asking through DefaultLauncher, one job at a time on a 10 % grid with
// 10 % headroom.
func Default(trace []llm.Request) (Config, error) {
	step, err := defaultProfile("mi300x-vllm-decode-step.json")
	if err != nil {
		return Config{}, err
	}
	engine := llm.Default()
	engine.Scheduler.MaxNumBatchedTokens = DefaultBatchedTokens
	busy, burst, err := Solo(engine, trace)
	if err != nil {
		return Config{}, err
	}
	cfg, err := common(trace)
	if err != nil {
		return Config{}, err
	}
	cfg.Engine = &engine
	// The prediction simulates Requests steps: a burst of at most a tenth
	// of them.
	cfg.Service = admission.EngineService("chat", step, max(0.001, busy), min(max(1, burst), float64(cfg.Requests)/10), DefaultStepSLOMS)
	return cfg, nil
}

// DefaultPredicted is the replay of `colocd replay --server predictor`:
// the V100 inference service at the trace's mean rate with a p99 SLO of
// DefaultSLOP99MS, each request's latency drawn from colocd's own
// prediction (simserver), otherwise as Default.
func DefaultPredicted(trace []llm.Request) (Config, error) {
	inf, err := defaultProfile("v100-infer-200.json")
	if err != nil {
		return Config{}, err
	}
	cfg, err := common(trace)
	if err != nil {
		return Config{}, err
	}
	cfg.Service = admission.ServiceSpec{Name: "chat", Profile: inf, RateRPS: MeanRate(trace), SLOP99MS: DefaultSLOP99MS}
	return cfg, nil
}

// common is what the default replays share.
func common(trace []llm.Request) (Config, error) {
	tr, err := defaultProfile("v100-train-step.json")
	if err != nil {
		return Config{}, err
	}
	cal, err := predictor.CalibrationPreset(DefaultDevice)
	if err != nil {
		return Config{}, err
	}
	settings := admission.DefaultSettings()
	settings.PctStep, settings.MaxJobs = 10, 1
	return Config{Mode: predictor.ModeMPS, Settings: settings, Calibration: cal, Requests: 1000, PredictorSeed: 1, SMs: DefaultSMs,
		Trace: trace, ServerSeed: 11, Launcher: DefaultLauncher(tr)}, nil
}

// Solo runs engine alone over trace and returns what a team reads off its
// server: the fraction of time it has work and its mean burst of steps.
func Solo(engine llm.Config, trace []llm.Request) (busy, burst float64, err error) {
	if len(trace) == 0 {
		return 0, 0, fmt.Errorf("solo run: no request")
	}
	engine.Requests, engine.Start = trace, start
	e, err := llm.New(engine)
	if err != nil {
		return 0, 0, err
	}
	end := start.Add(trace[len(trace)-1].Arrival)
	for now := start; now.Before(end); now = now.Add(time.Minute) {
		if err := e.Advance(now); err != nil {
			return 0, 0, err
		}
	}
	if err := e.Advance(end); err != nil {
		return 0, 0, err
	}
	st := e.Stats()
	if st.BusyPeriods == 0 {
		return 0, 1, nil
	}
	return min(1, st.Busy.Seconds()/max(time.Second, end.Sub(start)).Seconds()), float64(st.Steps) / float64(st.BusyPeriods), nil
}

func defaultProfile(name string) (*predictor.Profile, error) {
	data, err := defaults.ReadFile("defaults/" + name)
	if err != nil {
		return nil, fmt.Errorf("default profile %s: %w", name, err)
	}
	return predictor.ParseProfile(data)
}

// MeanRate is the trace's mean rate, in requests a second: its count over
// the span from the first arrival to the last (a second at least).
func MeanRate(trace []llm.Request) float64 {
	if len(trace) == 0 {
		return 0
	}
	span := max(time.Second, trace[len(trace)-1].Arrival-trace[0].Arrival)
	return float64(len(trace)) / span.Seconds()
}

// Slice returns the requests that arrived in [from, from+d), their
// arrivals offsets from from; d of 0 takes every request from from on.
func Slice(trace []llm.Request, from, d time.Duration) []llm.Request {
	var out []llm.Request
	for _, r := range trace {
		if r.Arrival >= from && (d == 0 || r.Arrival < from+d) {
			r.Arrival -= from
			out = append(out, r)
		}
	}
	return out
}
