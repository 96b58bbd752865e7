package predictor

import (
	"errors"
	"fmt"
)

// SpreadRates spreads rates (or, when given, loads) over services
// services: one value for all, or one per service in order (colocd
// predict's --rate and --load; its errors name them).
func (sc *Scenario) SpreadRates(services int, rates, loads []float64) error {
	vals, flag := rates, "--rate"
	if len(loads) > 0 {
		vals, flag = loads, "--load"
	}
	if len(vals) == 0 || services == 0 {
		return nil // Validate names what is missing
	}
	if len(vals) != 1 && len(vals) != services {
		return fmt.Errorf("%s: want one value for every service or one per --inference (%d), got %d", flag, services, len(vals))
	}
	at := func(j int) float64 { return vals[min(j, len(vals)-1)] }
	sc.Others = nil
	for j := range services {
		r, l := 0.0, 0.0
		if flag == "--rate" {
			r = at(j)
		} else {
			l = at(j)
		}
		if j == 0 {
			sc.RateRPS, sc.Load = r, l
			continue
		}
		sc.Others = append(sc.Others, OtherService{RateRPS: r, Load: l})
	}
	return nil
}

// SpreadBursts spreads bursts (--burst-steps) over the loaded services: one
// value for all, or one per service in order.
func (sc *Scenario) SpreadBursts(bursts []float64) error {
	services := 1 + len(sc.Others)
	if len(bursts) == 0 {
		return nil
	}
	if len(bursts) != 1 && len(bursts) != services {
		return fmt.Errorf("--burst-steps: want one value for every service or one per --inference (%d), got %d", services, len(bursts))
	}
	at := func(j int) float64 { return bursts[min(j, len(bursts)-1)] }
	sc.BurstSteps = at(0)
	for j := range sc.Others {
		sc.Others[j].BurstSteps = at(j + 1)
	}
	return nil
}

// LoadScenario checks the mode, loads the inference profiles (the first
// the service, the rest its co-runners) and the training profiles into sc,
// and returns the calibration to predict with: calPath's, else the preset
// of the service's GPU. Its errors name colocd predict's flags.
func LoadScenario(sc *Scenario, mode Mode, infPaths []string, trainPaths []string, calPath string) (*Calibration, error) {
	if len(infPaths) == 0 || infPaths[0] == "" {
		return nil, errors.New("--inference: want the path of an inference profile")
	}
	switch mode {
	case ModeTimeslice:
		if len(sc.TrainingPct) > 0 || sc.InferencePct != 100 {
			return nil, errors.New("--pct and --inference-pct: want --mode mps (time slicing has no percentages)")
		}
	case ModeMPS:
	default:
		return nil, fmt.Errorf("--mode: want timeslice or mps, got %q", mode)
	}
	inf, err := LoadProfile(infPaths[0])
	if err != nil {
		return nil, fmt.Errorf("--inference: %w", err)
	}
	sc.Inference = inf
	for j, path := range infPaths[1:] {
		p, err := LoadProfile(path)
		if err != nil {
			return nil, fmt.Errorf("--inference %s: %w", path, err)
		}
		if j >= len(sc.Others) { // no rate given: Validate names it
			sc.Others = append(sc.Others, OtherService{})
		}
		sc.Others[j].Profile = p
	}
	cal, err := ResolveCalibration(calPath, inf.Device.Name)
	if err != nil {
		return nil, fmt.Errorf("--calibration: %w", err)
	}
	if sc.DeviceSMs == 0 {
		sc.DeviceSMs = cal.Device.SMs
	}
	for _, p := range trainPaths {
		t, err := LoadProfile(p)
		if err != nil {
			return nil, fmt.Errorf("--training: %w", err)
		}
		sc.Training = append(sc.Training, t)
	}
	if sc.Requests <= 0 {
		return nil, fmt.Errorf("--requests: want a count ≥ 1, got %d", sc.Requests)
	}
	return cal, nil
}
