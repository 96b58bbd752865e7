package predictor

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// IterationFigure is the naive ratio's key for a training job's iteration
// time (every job of a record alike).
const IterationFigure = "training_iteration_ms"

// MaxNaiveRatio bounds a naive ratio (measured / solo): far beyond any
// slowdown a co-location shows, small enough that products stay finite.
const MaxNaiveRatio = 1000

// Blend is how a calibrated prediction of one mode mixes the simulator with
// the naive slowdown: each figure is Weight × the simulator's value +
// (1 − Weight) × the naive one, the figure's solo value (the service alone
// at the same rate and arrivals, the trainer's solo iteration) times
// NaiveRatio[figure]. `colocd calibrate` fits the ratios on its records and
// chooses the weight by cross-validated error; the rest reports that choice.
// A calibration without a blend is the simulator alone (weight 1).
type Blend struct {
	// Weight is the simulator's share, in [0, 1].
	Weight *float64 `json:"weight"`
	// NaiveRatio is, per figure ("latency_ms.p99", "service_ms.mean", …,
	// IterationFigure), the median measured / solo ratio over the
	// calibration's records. A figure without one keeps the simulator's
	// value.
	NaiveRatio map[string]float64 `json:"naive_ratio,omitempty"`
	// CV names the folds the choice was scored on (the fit's
	// cross-validation).
	CV string `json:"cv,omitempty"`
	// CVMAPE is the held-out error of the simulator, the naive slowdown and
	// the blend on those folds.
	CVMAPE *BlendCV `json:"cv_mape,omitempty"`
	// Grid is every weight tried with its held-out error over all folds:
	// the weight chosen is the grid's best (ties: the larger weight).
	Grid []BlendPoint `json:"grid,omitempty"`
	// FoldWeights is, per fold, the weight chosen on the other folds alone:
	// the nested choice that CVMAPE.Blend scores.
	FoldWeights []float64 `json:"fold_weights,omitempty"`
}

// BlendCV compares three predictions of the same held-out records, each a
// mean absolute percentage error (a fraction) over the same metrics. Blend
// is nested: each fold is predicted with the weight chosen on the other
// folds, so the choice never saw the record it is scored on.
type BlendCV struct {
	Simulator float64 `json:"simulator"`
	Naive     float64 `json:"naive"`
	Blend     float64 `json:"blend"`
	Metrics   int     `json:"metrics"`
}

// BlendPoint is one weight of the grid and its held-out error.
type BlendPoint struct {
	Weight float64 `json:"weight"`
	CVMAPE float64 `json:"cv_mape"`
}

// BlendFigures are the keys a naive ratio may have.
var BlendFigures = func() []string {
	var out []string
	for _, q := range []string{"latency_ms", "service_ms"} {
		for _, k := range PercentileKeys {
			out = append(out, q+"."+k)
		}
	}
	return append(out, IterationFigure)
}()

// SimulatorWeight is the blend's weight of the simulator: 1 for no blend.
func (b *Blend) SimulatorWeight() float64 {
	if b == nil || b.Weight == nil {
		return 1
	}
	return *b.Weight
}

// active says whether the blend moves any prediction.
func (b *Blend) active() bool { return b.SimulatorWeight() < 1 && len(b.NaiveRatio) > 0 }

// check names every bad field of the blend at at.
func (b *Blend) check(fc *fieldChecker, at string) {
	if b.Weight == nil {
		fc.add(at+".weight", "the simulator's weight in [0, 1]", "nothing")
	} else if w := *b.Weight; !(w >= 0 && w <= 1) {
		fc.add(at+".weight", "the simulator's weight in [0, 1]", fmtFloat(w))
	}
	for _, k := range slices.Sorted(maps.Keys(b.NaiveRatio)) {
		if !slices.Contains(BlendFigures, k) {
			fc.add(at+".naive_ratio."+k, "a figure: "+strings.Join(BlendFigures, ", "), fmt.Sprintf("%q", k))
			continue
		}
		if v := b.NaiveRatio[k]; !(v > 0 && v <= MaxNaiveRatio) {
			fc.add(at+".naive_ratio."+k, "a ratio of measured to solo in (0, 1000]", fmtFloat(v))
		}
	}
	if b.Weight != nil && *b.Weight < 1 && len(b.NaiveRatio) == 0 {
		fc.add(at+".naive_ratio", "a ratio for at least one figure when weight < 1", "none")
	}
	for i, w := range b.FoldWeights {
		if !(w >= 0 && w <= 1) {
			fc.add(fmt.Sprintf("%s.fold_weights[%d]", at, i), "a weight in [0, 1]", fmtFloat(w))
		}
	}
}

// naive returns the naive value of figure for a solo value, and whether
// the blend has a ratio for it.
func (b *Blend) naive(figure string, solo float64) (float64, bool) {
	r, ok := b.NaiveRatio[figure]
	if !ok || !(solo > 0) {
		return 0, false
	}
	return r * solo, true
}

// mix is the blend of a simulated value with a naive one.
func (b *Blend) mix(sim, naive float64) float64 {
	w := b.SimulatorWeight()
	return w*sim + (1-w)*naive
}

// Apply replaces every figure of pred that has a naive ratio by the blend
// of the simulator's value with the naive one. An interval's ends are
// blended with the same naive value, so the simulator's sampling and
// parameter uncertainty shrinks by its weight; the model's own error is
// added after (WidenByModelError on BlendedFit). A trainer's slowdown,
// throughput and iterations per second follow its blended iteration time.
// It reports whether anything moved.
func (b *Blend) Apply(pred *Prediction) bool {
	if !b.active() {
		return false
	}
	for j := range pred.Services {
		sp := &pred.Services[j]
		b.applyPercentiles("latency_ms", &sp.LatencyMS, &sp.LatencyInterval, sp.SoloLatencyMS)
		b.applyPercentiles("service_ms", &sp.ServiceMS, &sp.ServiceInterval, sp.SoloServiceMS)
	}
	if len(pred.Services) > 0 {
		pred.Inference = pred.Services[0]
	}
	for i := range pred.Training {
		tp := &pred.Training[i]
		if tp.IterationMS == nil || tp.SoloIterationMS == nil {
			continue // a stream trainer: no iteration to blend
		}
		n, ok := b.naive(IterationFigure, *tp.SoloIterationMS)
		if !ok {
			continue
		}
		it := b.mix(*tp.IterationMS, n)
		ips := 1000 / it
		tp.IterationMS, tp.IterationsPerS = &it, &ips
		tp.Slowdown = it / *tp.SoloIterationMS
		tp.Throughput = 1 / tp.Slowdown
	}
	w := b.SimulatorWeight()
	pred.Blend = &w
	return true
}

// applyPercentiles blends one quantity's figures and their intervals.
func (b *Blend) applyPercentiles(quantity string, point *Percentiles, iv *Intervals, solo Percentiles) {
	iv.each(func(key string, in *Interval) {
		s, _ := solo.Get(key)
		n, ok := b.naive(quantity+"."+key, s)
		if !ok {
			return
		}
		v, _ := point.Get(key)
		point.set(key, b.mix(v, n))
		in[0], in[1] = b.mix(in[0], n), b.mix(in[1], n)
	})
}

// BlendedFit returns fit with every record's predictions replaced by the
// blend's, from the naive predictions calibrate wrote beside the
// simulator's (naive in-sample, cv_naive held out), so that the model's
// own error (ModelError) is the blend's. A metric without the naive value
// it needs keeps the simulator's. Without an active blend it returns fit.
func (b *Blend) BlendedFit(fit *FitReport) *FitReport {
	if fit == nil || !b.active() {
		return fit
	}
	out := *fit
	out.PerRecord = make([]RecordFit, len(fit.PerRecord))
	for i, r := range fit.PerRecord {
		ms := slices.Clone(r.Metrics)
		for j := range ms {
			m := &ms[j]
			if m.Naive != nil {
				m.Predicted = b.mix(m.Predicted, *m.Naive)
			}
			if m.CVPredicted != nil && m.CVNaive != nil {
				v := b.mix(*m.CVPredicted, *m.CVNaive)
				m.CVPredicted = &v
			}
		}
		out.PerRecord[i] = RecordFit{Name: r.Name, Metrics: ms}
	}
	return &out
}

// set stores the named figure ("mean", "p50", …); unknown names are
// ignored.
func (p *Percentiles) set(key string, v float64) {
	switch key {
	case "mean":
		p.Mean = v
	case "p50":
		p.P50 = v
	case "p90":
		p.P90 = v
	case "p95":
		p.P95 = v
	case "p99":
		p.P99 = v
	}
}
