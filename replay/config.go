package replay

import (
	"fmt"
	"strings"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/simserver/llm"
)

// FromConfig is the replay of trace against one service of a colocd
// configuration: its profile, rate and SLO, its metrics preset, interval
// and window, the sharing mode, the admission settings and the predictor's
// settings, with the calibration for device (a preset name, merged with
// predictor.calibration) and sms SMs, and DefaultLauncher with the
// default training profile; on engine (nil: the server that draws from
// the prediction). service may be empty when the file has one.
func FromConfig(cfg *configs.Config, service, device string, sms int, trace []llm.Request, engine *llm.Config) (Config, error) {
	specs, err := cfg.ServiceSpecs()
	if err != nil {
		return Config{}, err
	}
	i := -1
	var names []string
	for j, s := range specs {
		names = append(names, s.Name)
		if s.Name == service || service == "" && len(specs) == 1 {
			i = j
		}
	}
	if i < 0 {
		return Config{}, fmt.Errorf("service %q: want one of the configuration's services (%s)", service, strings.Join(names, ", "))
	}
	cal, err := predictor.ResolveCalibration(cfg.Predictor.Calibration, device)
	if err != nil {
		return Config{}, fmt.Errorf("predictor.calibration: %w", err)
	}
	tr, err := defaultProfile("v100-train-step.json")
	if err != nil {
		return Config{}, err
	}
	sv := cfg.Services[i]
	out := Config{
		Service: specs[i], Mode: predictor.Mode(cfg.Sharing.Mode), Settings: cfg.Admission,
		Calibration: cal, Requests: cfg.Predictor.Requests, PredictorSeed: cfg.Predictor.Seed, SMs: sms, Confidence: cfg.Predictor.Confidence,
		Preset: sv.Metrics.Preset, Trace: trace, ServerSeed: 11, Launcher: DefaultLauncher(tr),
		Observe: observe.Config{Interval: sv.Metrics.Interval, Window: sv.Metrics.Window, Forecast: sv.Metrics.Forecast}, Engine: engine,
	}
	if out.Preset == "triton" || out.Preset == "generic" {
		out.Preset = "vllm" // the simulated server speaks vLLM's, SGLang's or TGI's format
	}
	return out, nil
}
