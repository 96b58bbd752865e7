package calibrate

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// mpsCalibrationRecords spans what stage 2 must separate: inference kernels
// light and heavy on DRAM and L2, trainers of each kind, three percentages.
func mpsCalibrationRecords() []Record {
	jit := func(p *predictor.Profile, seed uint64) *predictor.Profile {
		rng := rand.New(rand.NewPCG(seed, 3))
		for i := range p.Ops {
			p.Ops[i].DurUS *= 0.5 + rng.Float64()
		}
		return p
	}
	infs := []*predictor.Profile{
		jit(mpsProfile("inf-dram", predictor.KindInference, 10, 200, 20, 0.5, 0.8, 0.2), 1),
		jit(mpsProfile("inf-l2", predictor.KindInference, 10, 200, 20, 0.5, 0.1, 0.8), 2),
		jit(mpsProfile("inf-compute", predictor.KindInference, 10, 200, 20, 0.9, 0.2, 0.2), 3),
	}
	trains := []*predictor.Profile{
		jit(mpsProfile("tr-dram", predictor.KindTraining, 30, 400, 30, 0.7, 0.7, 0.3), 4),
		jit(mpsProfile("tr-l2", predictor.KindTraining, 30, 400, 30, 0.6, 0.2, 0.7), 5),
		jit(mpsProfile("tr-compute", predictor.KindTraining, 30, 400, 30, 0.9, 0.1, 0.1), 6),
	}
	var recs []Record
	for _, inf := range infs {
		for _, tr := range trains {
			for _, pct := range []float64{100, 50, 25} {
				recs = append(recs, Record{
					Name: inf.Name + "+" + tr.Name, Mode: predictor.ModeMPS, TrainingPct: pct,
					Inference: ProfileRef{Profile: inf}, Training: []ProfileRef{{Profile: tr}},
					RateRPS: 0.4 * 1e6 / inf.SoloUS(), Requests: 400,
				})
			}
		}
	}
	return recs
}

// syntheticMPSMeasurements predicts each record with truth and stores the
// result, with multiplicative Gaussian noise, as the record's measurement.
func syntheticMPSMeasurements(t *testing.T, truth predictor.MPSParams, noise float64, recs []Record) *Measurements {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 11))
	jitter := func(v float64) float64 { return v * (1 + noise*rng.NormFloat64()) }
	m := &Measurements{Format: MeasurementsFormat, Device: predictor.Device{Name: "NVIDIA H200", SMs: 132}, Records: recs}
	var pr predictor.Predictor
	for i := range m.Records {
		r := &m.Records[i]
		pred, err := predictSeeds(FitOptions{}, r.scenario(FitOptions{Seed: 1}, 132), func(sc *predictor.Scenario) (*predictor.Prediction, error) { return pr.PredictMPS(sc, truth) })
		if err != nil {
			t.Fatal(err)
		}
		r.Measured = Measured{
			LatencyMS: map[string]float64{"mean": jitter(pred.Inference.LatencyMS.Mean), "p99": jitter(pred.Inference.LatencyMS.P99)},
			ServiceMS: map[string]float64{"mean": jitter(pred.Inference.ServiceMS.Mean)},
		}
		r.Measured.TrainingIterationMS = FloatList{jitter(*pred.Training[0].IterationMS)}
	}
	return m
}

// Records in which nothing overlaps on DRAM or L2 cannot move those
// coefficients off zero, and a fit of stage 1 alone stays at zero.
func TestFitMPSZeroTruth(t *testing.T) {
	t.Parallel()
	recs := mpsCalibrationRecords()[:6]
	m := syntheticMPSMeasurements(t, predictor.MPSParams{}, 0, recs)
	cal, err := FitMPS(context.Background(), m, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range cal.Params().Vector() {
		if v > 1e-3 {
			t.Errorf("%s = %v, want 0 for measurements of stage 1 alone", predictor.MPSFeatures[i], v)
		}
	}
	if cal.Fit.MAPE > 1e-6 {
		t.Errorf("MAPE %v on noise-free stage-1 measurements", cal.Fit.MAPE)
	}
	// Nothing overlaps: the records cannot tell the memory coefficients,
	// whose intervals are left open or wide.
	if len(cal.Fit.Unidentified) == 0 {
		t.Errorf("no coefficient reported unidentified from records with no overlap: %+v", cal.Fit.Parameters)
	}
}

func TestFitMPSNoRecords(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", predictor.KindInference, 3, 100, 0)
	m := &Measurements{Format: MeasurementsFormat, Records: []Record{{Name: "t", Mode: predictor.ModeTimeslice, Inference: ProfileRef{Profile: inf}, RateRPS: 5,
		Measured: Measured{LatencyMS: map[string]float64{"p99": 3}}}}}
	if _, err := FitMPS(context.Background(), m, FitOptions{}); !errors.Is(err, ErrNoRecords) {
		t.Errorf("err = %v, want ErrNoRecords", err)
	}
}
