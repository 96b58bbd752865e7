package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/atomicfile"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/simserver/llm"
)

// Options are what `colocd replay` is asked: each field is the flag of
// the same name.
type Options struct {
	Trace, Config, Service, Server, Training, Device string
	Forecast                                         string
	SMs                                              int
	Error                                            float64
	Start, Minutes                                   int
	Policies                                         []string
	Seed                                             uint64
	// StepBuckets, with Server "llm", are the bounds of the engine's
	// inter-token latency histogram, in seconds (nil: vLLM's own): what
	// the guard sees of the p99 near the SLO.
	StepBuckets []float64
}

// Prepare reads the trace and builds the replay o asks for: from the
// configuration when o.Config is set, else Default (or DefaultPredicted
// with Server "predictor"). Its errors name the flag.
func Prepare(o Options) (Config, error) {
	if o.Trace == "" {
		return Config{}, fmt.Errorf("--trace: want an arrival trace file")
	}
	if o.Start < 0 || o.Minutes < 0 {
		return Config{}, fmt.Errorf("--start %d, --minutes %d: want minutes ≥ 0", o.Start, o.Minutes)
	}
	var want []Policy
	for _, p := range o.Policies {
		pol, err := ParsePolicy(strings.TrimSpace(p))
		if err != nil {
			return Config{}, fmt.Errorf("--policies: %w", err)
		}
		want = append(want, pol)
	}
	if o.Server != "llm" && o.Server != "predictor" {
		return Config{}, fmt.Errorf("--server: want llm or predictor, got %q", o.Server)
	}
	if o.StepBuckets != nil && o.Server != "llm" {
		return Config{}, fmt.Errorf("--step-buckets: want --server llm (the predicted server's histogram has bounds of its own), got --server %s", o.Server)
	}
	all, err := readTrace(o.Trace)
	if err != nil {
		return Config{}, err
	}
	trace := Slice(all, time.Duration(o.Start)*time.Minute, time.Duration(o.Minutes)*time.Minute)
	if len(trace) == 0 {
		return Config{}, fmt.Errorf("--start %d --minutes %d: no request of the trace's %d in that span", o.Start, o.Minutes, len(all))
	}
	var cfg Config
	switch {
	case o.Config != "":
		file, err := configs.Load(o.Config)
		if err != nil {
			return Config{}, fmt.Errorf("--config: %w", err)
		}
		var engine *llm.Config
		if o.Server == "llm" {
			e := llm.Default()
			engine = &e
		}
		if cfg, err = FromConfig(file, o.Service, o.Device, o.SMs, trace, engine); err != nil {
			return Config{}, fmt.Errorf("--config %s: %w", o.Config, err)
		}
	case o.Service != "":
		return Config{}, fmt.Errorf("--service: want --config too (the default replay has one service)")
	case o.Server == "llm":
		cfg, err = Default(trace)
	default:
		cfg, err = DefaultPredicted(trace)
	}
	if err != nil {
		return Config{}, err
	}
	if o.Config == "" {
		// The default replay's guard and headroom are colocd's defaults,
		// or what the keys' environment overrides say
		// (COLOCD_ADMISSION_GUARD_RAISE_AFTER=2m,
		// COLOCD_ADMISSION_HEADROOM=0.05): a setting is replayed as it
		// would run.
		env, err := configs.Load("")
		if err != nil {
			return Config{}, fmt.Errorf("admission: %w", err)
		}
		cfg.Settings.Guard, cfg.Settings.Headroom = env.Admission.Guard, env.Admission.Headroom
	}
	if o.Training != "" {
		if cfg.Launcher.Profile, err = predictor.LoadProfile(o.Training); err != nil {
			return Config{}, fmt.Errorf("--training: %w", err)
		}
	}
	if cfg.Observe.Forecast, err = ParseForecast(o.Forecast, cfg.Observe.Forecast); err != nil {
		return Config{}, fmt.Errorf("--forecast: %w", err)
	}
	cfg.ErrorFactor, cfg.ServerSeed, cfg.Policies = o.Error, o.Seed, want
	if o.StepBuckets != nil && cfg.Engine != nil {
		e := *cfg.Engine
		e.ITLBuckets = o.StepBuckets
		if err := e.Validate(); err != nil {
			return Config{}, fmt.Errorf("--step-buckets: %w", err)
		}
		cfg.Engine = &e
	}
	return cfg, nil
}

// readTrace reads the --trace file, or draws the synthetic trace it names
// (synth.go).
func readTrace(name string) ([]llm.Request, error) {
	if kind, seed, ok, err := ParseSynthetic(name); ok {
		if err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
		return Synthetic(kind, seed)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	defer f.Close()
	all, err := llm.ParseTrace(f)
	if err != nil {
		return nil, fmt.Errorf("--trace %s: %w", name, err)
	}
	return all, nil
}

// Report writes the results: as JSON ({"policies": [...]}), or a line
// that says what was replayed and a table; with svgPath, their picture too.
func Report(w io.Writer, name string, cfg Config, results []Result, asJSON bool, svgPath string) error {
	if svgPath != "" {
		title := fmt.Sprintf("%s: %s, SLO p99 %g ms, error ×%g", name, cfg.Service.Name, cfg.Service.SLOP99MS, cfg.ErrorFactor)
		load := "req/s"
		if cfg.Service.BurstSteps > 0 {
			load = "arrivals in req/s, the engine's observed and forecast steps/s"
		}
		if err := atomicfile.Write(svgPath, SVG(title, load, cfg.Service.SLOP99MS, results), 0o644); err != nil {
			return fmt.Errorf("--svg: %w", err)
		}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Policies []Result `json:"policies"`
		}{results})
	}
	planned := fmt.Sprintf("planned at %.2f req/s, SLO p99 %g ms", cfg.Service.RateRPS, cfg.Service.SLOP99MS)
	if cfg.Service.BurstSteps > 0 {
		planned = fmt.Sprintf("an engine planned at %.1f steps/s in bursts of %.0f, SLO inter-token p99 %g ms", cfg.Service.RateRPS, cfg.Service.BurstSteps, cfg.Service.SLOP99MS)
	}
	server := "latencies drawn from the prediction"
	if cfg.Engine != nil {
		server = "an LLM engine"
	}
	trace := cfg.Trace
	fmt.Fprintf(w, "%s: %d requests over %.0f min (%.2f req/s); service %s %s; the server: %s, ×%g\n",
		name, len(trace), trace[len(trace)-1].Arrival.Minutes(), MeanRate(trace), cfg.Service.Name, planned, server, max(1, cfg.ErrorFactor))
	return WriteTable(w, results)
}
