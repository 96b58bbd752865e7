package calibrate

import (
	"context"
	"flag"
	"math"
	"testing"

	"github.com/colocd/colocd/predictor"
)

var study = flag.Bool("study", false, "run the calibration study of docs/predictor.md (make calibration-study)")

// TestCalibrationStudy fits two records (mean and p99 of the inference
// latency, as a user with little time measures) and predicts the p99 of
// the seven records held out, under the objective before weights, seeds
// and the prior, and under today's; for each truth it prints both, and
// fails if today's held-out error is the larger.
func TestCalibrationStudy(t *testing.T) {
	t.Parallel()
	if !*study {
		t.Skip("a study, not a unit test: make calibration-study")
	}
	truths := []predictor.TimesliceParams{
		{SliceUS: 1000, SwitchUS: 150, HoldoverUS: 300},
		{SliceUS: 2000, SwitchUS: 80, HoldoverUS: 400},
		{SliceUS: 1024, SwitchUS: 30, HoldoverUS: 200},
	}
	objectives := []struct {
		name string
		opts FitOptions
	}{
		{"equal weights, 1 seed, no prior", FitOptions{Weights: map[string]float64{"mean": 1, "p50": 1, "p90": 1, "p95": 1, "p99": 1, WeightIteration: 1}, Seeds: 1, NoPrior: true}},
		{"defaults (p99 first, 3 seeds, prior)", FitOptions{}},
	}
	for _, truth := range truths {
		all := syntheticMeasurements(t, truth, 0.01, calibrationRecords())
		train := &Measurements{Format: MeasurementsFormat}
		var held []Record
		for i, r := range all.Records {
			if i == 0 || i == 1 { // short+busy at loads 0.1 and 0.3
				r.Measured = Measured{LatencyMS: map[string]float64{"mean": r.Measured.LatencyMS["mean"], "p99": r.Measured.LatencyMS["p99"]}}
				train.Records = append(train.Records, r)
				continue
			}
			held = append(held, r)
		}
		errs := make([]float64, len(objectives))
		for k, ob := range objectives {
			cal, err := FitTimeslice(context.Background(), train, ob.opts)
			if err != nil {
				t.Fatal(err)
			}
			var pr predictor.Predictor
			var sum float64
			for _, r := range held {
				p, err := predictSeeds(FitOptions{Seeds: 3}, r.scenario(FitOptions{Seed: 1}, 0), func(sc *predictor.Scenario) (*predictor.Prediction, error) {
					return pr.PredictTimeslice(sc, *cal.Timeslice)
				})
				if err != nil {
					t.Fatal(err)
				}
				sum += math.Abs(p.Inference.LatencyMS.P99-r.Measured.LatencyMS["p99"]) / r.Measured.LatencyMS["p99"]
			}
			errs[k] = sum / float64(len(held))
			ts := cal.Timeslice
			t.Logf("truth %v/%v/%v, %s: fit %.0f/%.0f/%.0f µs, in-sample MAPE %.1f %%, held-out p99 MAPE %.1f %% (%d records)",
				truth.SliceUS, truth.SwitchUS, truth.HoldoverUS, ob.name, ts.SliceUS, ts.SwitchUS, ts.HoldoverUS, 100*cal.Fit.MAPE, 100*errs[k], len(held))
		}
		if errs[1] > errs[0] {
			t.Errorf("truth %+v: held-out p99 error %.3f with the defaults, above %.3f before", truth, errs[1], errs[0])
		}
	}
}
