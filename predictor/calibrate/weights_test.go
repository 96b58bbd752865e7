package calibrate

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
	"github.com/colocd/colocd/predictor"
)

// The objective weights each metric by its key: an error on the p99 costs
// ten times one on the mean under the default weights, and with a user's
// weights only what they name counts. The reported MAPE weighs every
// metric the same.
func TestScoreMetricsWeights(t *testing.T) {
	t.Parallel()
	metrics := [][]metric{{
		{quantity: "latency_ms", key: "mean", value: 1},
		{quantity: "latency_ms", key: "p99", value: 4},
	}}
	pred := &predictor.Prediction{}
	pred.Inference.LatencyMS.Mean = 1.2 // 20 % high
	pred.Inference.LatencyMS.P99 = 4    // exact
	all := func(int) bool { return true }
	l := math.Log(1.2)
	for _, tt := range []struct {
		name     string
		w        map[string]float64
		wantMSLE float64
	}{
		{"unweighted", nil, l * l / 2},
		{"defaults: the mean weighs 0.1 against the p99's 1", DefaultWeights, 0.1 * l * l / 1.1},
		{"p99 alone", map[string]float64{"p99": 1}, 0},
		{"mean alone", map[string]float64{"mean": 1}, l * l},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mape, msle := scoreMetrics(metrics, []*predictor.Prediction{pred}, tt.w, all)
			if math.Abs(mape-0.1) > 1e-12 {
				t.Errorf("mape = %g, want 0.1 whatever the weights", mape)
			}
			if math.Abs(msle-tt.wantMSLE) > 1e-12 {
				t.Errorf("msle = %g, want %g", msle, tt.wantMSLE)
			}
		})
	}
}

func TestCheckFitOptions(t *testing.T) {
	t.Parallel()
	bad := DefaultTimeslicePrior
	bad[1].LogSD = 0
	tests := []struct {
		name string
		opts FitOptions
		want string // "" for valid
	}{
		{"defaults", FitOptions{}, ""},
		{"p99 only", FitOptions{Weights: map[string]float64{"p99": 1}}, ""},
		{"unknown key", FitOptions{Weights: map[string]float64{"p98": 1}}, "weights.p98: want one of"},
		{"NaN weight", FitOptions{Weights: map[string]float64{"p99": math.NaN()}}, "weights.p99: want a weight ≥ 0, got NaN"},
		{"all zero", FitOptions{Weights: map[string]float64{"p99": 0}}, "weights: want at least one weight above 0"},
		{"prior spread 0", FitOptions{Prior: &bad}, "prior.switch_us.log_sd: want a value > 0, got 0"},
		{"noise above 1", FitOptions{Noise: 1.5}, "noise: want a fraction in (0, 1]"},
		{"seeds", FitOptions{Seeds: MaxSeeds + 1}, "seeds: want a count from 1 to 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkFitOptions(tt.opts)
			if tt.want == "" {
				if err != nil {
					t.Errorf("err = %v, want nil", err)
				}
				return
			}
			fieldtest.WantText(t, err, tt.want)
		})
	}
}

// Weights that leave every measured metric at 0 fit nothing: an error, not
// parameters at the corner of the search.
func TestFitNoWeightedMetric(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", predictor.KindInference, 3, 100, 20)
	tr := uniformProfile("tr", predictor.KindTraining, 10, 300, 50)
	for _, mode := range []predictor.Mode{predictor.ModeTimeslice, predictor.ModeMPS} {
		m := &Measurements{Format: MeasurementsFormat, Device: predictor.Device{Name: "NVIDIA H200", SMs: 132}, Records: []Record{{
			Name: "r", Mode: mode, Inference: ProfileRef{Profile: inf}, Training: []ProfileRef{{Profile: tr}}, RateRPS: 500, Requests: 200, TrainingPct: 50,
			Measured: Measured{LatencyMS: map[string]float64{"mean": 1.2}},
		}}}
		opts := FitOptions{Weights: map[string]float64{"p99": 1}, Seeds: 1}
		var err error
		if mode == predictor.ModeMPS {
			_, err = FitMPS(context.Background(), m, opts)
		} else {
			_, err = FitTimeslice(context.Background(), m, opts)
		}
		if !errors.Is(err, ErrNoRecords) || !strings.Contains(err.Error(), "no record measured a metric whose weight is above 0") {
			t.Errorf("%s: err = %v, want ErrNoRecords naming the weights", mode, err)
		}
	}
}
