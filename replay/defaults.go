package replay

import (
	"embed"
	"fmt"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/predictor"
)

// defaults holds the profiles of the default replay: a real inference
// service and a real training step, both measured on a V100 (also
// testdata/profiles/, where the project's tests and examples read them).
//
//go:embed defaults/*.json
var defaults embed.FS

// The default replay's service: its SLO, and the device it runs on.
const (
	DefaultSLOP99MS = 100.0 // at 5.5 req/s a training job fits at about 30 %, at 8.5 at 10 to 20 %
	DefaultDevice   = "NVIDIA H200"
	DefaultSMs      = 132
)

// Default is the replay `colocd replay` runs without a configuration, so
// that two traces compare: the V100 inference service at the trace's own
// mean rate (what an inference team would configure) with a p99 SLO of
// DefaultSLOP99MS, on an H200 under MPS (its calibration preset), and the
// V100 training step asking through DefaultLauncher, one job at a time on
// a 10 % grid with 10 % headroom. The caller sets Arrivals' and the rest.
func Default(arrivals []time.Duration) (Config, error) {
	inf, err := defaultProfile("v100-infer-200.json")
	if err != nil {
		return Config{}, err
	}
	tr, err := defaultProfile("v100-train-step.json")
	if err != nil {
		return Config{}, err
	}
	cal, err := predictor.CalibrationPreset(DefaultDevice)
	if err != nil {
		return Config{}, err
	}
	settings := admission.DefaultSettings()
	settings.PctStep, settings.Headroom, settings.MaxJobs = 10, 0.1, 1
	return Config{
		Service:     admission.ServiceSpec{Name: "chat", Profile: inf, RateRPS: MeanRate(arrivals), SLOP99MS: DefaultSLOP99MS},
		Mode:        predictor.ModeMPS,
		Settings:    settings,
		Calibration: cal, Requests: 1000, PredictorSeed: 1, SMs: DefaultSMs,
		Arrivals: arrivals, ServerSeed: 11, Launcher: DefaultLauncher(tr),
	}, nil
}

func defaultProfile(name string) (*predictor.Profile, error) {
	data, err := defaults.ReadFile("defaults/" + name)
	if err != nil {
		return nil, fmt.Errorf("default profile %s: %w", name, err)
	}
	return predictor.ParseProfile(data)
}

// MeanRate is the arrivals' mean rate, in requests a second: their count
// over the span from the first to the last (a second at least).
func MeanRate(arrivals []time.Duration) float64 {
	if len(arrivals) == 0 {
		return 0
	}
	span := max(time.Second, arrivals[len(arrivals)-1]-arrivals[0])
	return float64(len(arrivals)) / span.Seconds()
}

// Slice returns the arrivals in [from, from+d) as offsets from from; d of
// 0 takes every arrival from from on.
func Slice(arrivals []time.Duration, from, d time.Duration) []time.Duration {
	var out []time.Duration
	for _, a := range arrivals {
		if a >= from && (d == 0 || a < from+d) {
			out = append(out, a-from)
		}
	}
	return out
}
