package calibrate

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/colocd/colocd/predictor"
)

// WeightIteration is the weight key of training iteration times; the other
// keys are predictor.PercentileKeys, for latency_ms and service_ms alike.
const WeightIteration = "iteration"

// DefaultWeights weight the SLO's metric first: every SLO is on p99, so a
// fit that trades a p99 for a mean is a worse fit. Iteration times weigh
// half: they show what the trainers see (the switching cost alone, with
// two trainers) and pin parameters the latencies cannot.
var DefaultWeights = map[string]float64{"p99": 1, "p95": 0.5, "p90": 0.25, "p50": 0.1, "mean": 0.1, WeightIteration: 0.5}

// DefaultSeeds is how many arrival seeds each record is simulated with: the
// predicted metrics are their mean, so that a fit is not steered by one
// seed's noise (about 4 % on a p99 of 2,000 requests). The seeds are the
// same in every evaluation (common random numbers), so that two parameter
// sets are compared on the same arrivals.
const DefaultSeeds = 3

// MaxSeeds bounds FitOptions.Seeds.
const MaxSeeds = 16

// weights returns the fit's weights: opts.Weights, else DefaultWeights.
func (opts FitOptions) weights() map[string]float64 {
	if opts.Weights == nil {
		return DefaultWeights
	}
	return opts.Weights
}

// seeds is the number of arrival seeds per record.
func (opts FitOptions) seeds() int {
	if opts.Seeds <= 0 {
		return DefaultSeeds
	}
	return min(opts.Seeds, MaxSeeds)
}

// CheckWeights checks a weight map: known keys, each weight a finite
// number ≥ 0, and one of them above 0.
func CheckWeights(w map[string]float64) error {
	var c checker
	keys := append(slices.Clone(predictor.PercentileKeys), WeightIteration)
	positive := false
	for _, k := range slices.Sorted(maps.Keys(w)) {
		v := w[k]
		switch {
		case !slices.Contains(keys, k):
			c.Add("weights."+k, fmt.Sprintf("one of %v", keys), fmt.Sprintf("%q", k))
		case !(v >= 0) || math.IsInf(v, 0):
			c.Add("weights."+k, "a weight ≥ 0", fmtFloat(v))
		case v > 0:
			positive = true
		}
	}
	if !positive {
		c.Add("weights", "at least one weight above 0", "none")
	}
	return c.Err("fit options")
}

// weightOf is the weight of metric m.
func weightOf(w map[string]float64, m metric) float64 {
	if m.quantity == "training_iteration_ms" {
		return w[WeightIteration]
	}
	return w[m.key]
}

// meanPrediction averages the metrics the fit reads (latency and service
// percentiles, their solo figures, iteration times) over predictions of
// the same scenario with other seeds.
func meanPrediction(ps []*predictor.Prediction) *predictor.Prediction {
	if len(ps) == 1 {
		return ps[0]
	}
	out := *ps[0]
	out.Training = slices.Clone(ps[0].Training)
	n := float64(len(ps))
	avg := func(get func(*predictor.Prediction) *predictor.Percentiles) predictor.Percentiles {
		var s predictor.Percentiles
		for _, p := range ps {
			q := get(p)
			s.Mean += q.Mean / n
			s.P50 += q.P50 / n
			s.P90 += q.P90 / n
			s.P95 += q.P95 / n
			s.P99 += q.P99 / n
		}
		return s
	}
	out.Inference.LatencyMS = avg(func(p *predictor.Prediction) *predictor.Percentiles { return &p.Inference.LatencyMS })
	out.Inference.ServiceMS = avg(func(p *predictor.Prediction) *predictor.Percentiles { return &p.Inference.ServiceMS })
	out.Inference.SoloLatencyMS = avg(func(p *predictor.Prediction) *predictor.Percentiles { return &p.Inference.SoloLatencyMS })
	out.Inference.SoloServiceMS = avg(func(p *predictor.Prediction) *predictor.Percentiles { return &p.Inference.SoloServiceMS })
	if len(out.Services) > 0 {
		out.Services = slices.Clone(out.Services)
		out.Services[0] = out.Inference
	}
	for j := range out.Training {
		sum, ok := 0.0, true
		for _, p := range ps {
			if j >= len(p.Training) || p.Training[j].IterationMS == nil {
				ok = false
				break
			}
			sum += *p.Training[j].IterationMS
		}
		if ok {
			v := sum / n
			out.Training[j].IterationMS = &v
		}
	}
	return &out
}

// predictSeeds predicts sc with the fit's seeds (sc.Seed, sc.Seed+1, …)
// and returns the mean prediction.
func predictSeeds(opts FitOptions, sc *predictor.Scenario, predict func(*predictor.Scenario) (*predictor.Prediction, error)) (*predictor.Prediction, error) {
	k := opts.seeds()
	ps := make([]*predictor.Prediction, 0, k)
	base := sc.Seed
	for s := range k {
		c := *sc
		c.Seed = base + uint64(s)
		p, err := predict(&c)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return meanPrediction(ps), nil
}
