package simserver

import (
	"errors"
	"fmt"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Options are what `colocd simserve` is asked: each field is the flag of
// the same name.
type Options struct {
	Inference, Training, Calibration, Trace string
	Preset, ModelName                       string
	Rate, Compress, Error                   float64
	Duration                                time.Duration
	Requests                                int
}

// Build checks o, loads its profiles, calibration and arrivals, and
// returns the server from start, with the trainers from trainers, and the
// jobs' training profile. Its errors name the flag.
func (o Options) Build(start time.Time, trainers func() []Trainer) (*Server, *predictor.Profile, error) {
	if o.Inference == "" || o.Training == "" {
		return nil, nil, errors.New("--inference and --training: want the paths of the service's and the jobs' profiles")
	}
	if (o.Trace == "") == (o.Rate == 0) {
		return nil, nil, errors.New("--trace or --rate: want one of the two")
	}
	if !(o.Compress > 0) || !(o.Error > 0) || o.Rate < 0 {
		return nil, nil, fmt.Errorf("--compress %g, --error %g, --rate %g: want factors above 0 and a rate ≥ 0", o.Compress, o.Error, o.Rate)
	}
	inf, err := predictor.LoadProfile(o.Inference)
	if err != nil {
		return nil, nil, fmt.Errorf("--inference: %w", err)
	}
	tr, err := predictor.LoadProfile(o.Training)
	if err != nil {
		return nil, nil, fmt.Errorf("--training: %w", err)
	}
	cal, err := predictor.ResolveCalibration(o.Calibration, inf.Device.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("--calibration: %w", err)
	}
	arrivals, err := Arrivals(o.Trace, o.Rate, o.Duration, o.Compress)
	if err != nil {
		return nil, nil, err
	}
	srv, err := New(Config{Preset: o.Preset, ModelName: o.ModelName, Arrivals: arrivals, Start: start,
		Latency:  &Model{Inference: inf, Calibration: cal, Mode: predictor.ModeMPS, Requests: o.Requests, Seed: 1, SMs: cal.Device.SMs},
		Trainers: trainers, ErrorFactor: o.Error, Seed: 1})
	return srv, tr, err
}
