package calibrate

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// The objective weights each metric by its key: an error on the p99 costs
// ten times one on the mean under the default weights, and with a user's
// weights only what they name counts. The reported MAPE weighs every
// metric the same.
func TestScoreMetricsWeights(t *testing.T) {
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
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// Two records, one trainer: three parameters cannot be pinned. The fit
// warns, and every parameter the records leave open is reported as set by
// the prior; without the prior, by nothing.
func TestFitTimesliceFewRecords(t *testing.T) {
	if raceEnabled {
		t.Skip("slow under the race detector; make test runs it without")
	}
	short := jitteredProfile("short", predictor.KindInference, 4, 100, 10, 0.5, 1)
	busy := jitteredProfile("busy", predictor.KindTraining, 40, 250, 20, 0.5, 3)
	var recs []Record
	for _, load := range []float64{0.1, 0.3} {
		recs = append(recs, Record{Name: "short+busy", Mode: predictor.ModeTimeslice,
			Inference: ProfileRef{Profile: short}, Training: []ProfileRef{{Profile: busy}},
			RateRPS: load * 1e6 / short.SoloUS(), Requests: 300})
	}
	m := syntheticMeasurements(t, predictor.TimesliceParams{SliceUS: 1000, SwitchUS: 150, HoldoverUS: 300}, 0.01, recs)
	for _, tt := range []struct {
		name    string
		noPrior bool
		by      string
	}{{"with the prior", false, predictor.PinnedByPrior}, {"without", true, predictor.PinnedByNone}} {
		t.Run(tt.name, func(t *testing.T) {
			cal, err := FitTimeslice(context.Background(), m, FitOptions{NoPrior: tt.noPrior, MaxEvaluations: 60})
			if err != nil {
				t.Fatal(err)
			}
			if len(cal.Fit.Warnings) == 0 || !strings.Contains(cal.Fit.Warnings[0], "2 records with 10 weighted metrics for 3 parameters: too few") {
				t.Errorf("warnings = %q, want one about too few records", cal.Fit.Warnings)
			}
			if (cal.Fit.Prior == nil) != tt.noPrior {
				t.Errorf("prior reported = %v, want reported: %v", cal.Fit.Prior, !tt.noPrior)
			}
			var open []string
			for _, p := range cal.Fit.Parameters {
				if p.PinnedBy != predictor.PinnedByRecords {
					open = append(open, p.Name)
					if p.PinnedBy != tt.by {
						t.Errorf("%s pinned by %s, want %s or records", p.Name, p.PinnedBy, tt.by)
					}
				}
			}
			if len(open) == 0 || !slices.Equal(open, cal.Fit.Unidentified) {
				t.Errorf("parameters left open %v, unidentified %v: want the same, not empty", open, cal.Fit.Unidentified)
			}
		})
	}
}

// Weights that leave every measured metric at 0 fit nothing: an error, not
// parameters at the corner of the search.
func TestFitNoWeightedMetric(t *testing.T) {
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
