package calibrate

import (
	"math"
	"slices"

	"github.com/colocd/colocd/predictor"
)

// BlendWeights is the grid of simulator weights a blend is chosen from.
var BlendWeights = []float64{0, 0.25, 0.5, 0.75, 1}

// Cross-validation schemes, as a fit report's cv names them.
const (
	cvWorkload = "leave-one-workload-out"
	cvRecord   = "leave-one-record-out"
)

// cvGroups returns the folds of a fit's cross-validation, as indices into
// recs, and their name: one per training workload when there are two or
// more; else, with perRecord, one per record; else none.
func cvGroups(recs []*Record, perRecord bool) ([][]int, string) {
	if g := workloadGroups(recs); len(g) >= 2 {
		return g, cvWorkload
	}
	if !perRecord || len(recs) < 2 {
		return nil, ""
	}
	var g [][]int
	for i := range recs {
		g = append(g, []int{i})
	}
	return g, cvRecord
}

// cvBlend is chooseBlend on the folds of the fit's cross-validation
// (cvGroups with perRecord), when opts ask for the cross-validation and a
// blend and the fit was cross-validated (rep.CVMAPE); else nil.
func cvBlend(opts FitOptions, recs []*Record, metrics [][]metric, preds []*predictor.Prediction, rep *predictor.FitReport, perRecord bool) *predictor.Blend {
	if !opts.CrossValidate || opts.NoBlend || rep.CVMAPE == nil {
		return nil
	}
	folds, how := cvGroups(recs, perRecord)
	return chooseBlend(metrics, preds, rep, folds, how)
}

// solo returns the solo value that the naive slowdown scales for m: the
// service alone at the record's rate and arrivals, or the trainer's solo
// iteration; NaN when the prediction has none.
func (m metric) solo(p *predictor.Prediction) float64 {
	return m.of(p, p.Inference.SoloLatencyMS, p.Inference.SoloServiceMS, func(t predictor.TrainingPrediction) *float64 { return t.SoloIterationMS })
}

// figure is m's key in a blend's naive ratios: its field, every training
// job's iteration alike.
func (m metric) figure() string {
	if m.quantity == "training_iteration_ms" {
		return predictor.IterationFigure
	}
	return m.field()
}

// naiveRatios returns, per figure, the median of measured / solo over the
// metrics of the records include accepts (solos[i][j] is metric j of record
// i's solo value).
func naiveRatios(metrics [][]metric, solos [][]float64, include func(int) bool) map[string]float64 {
	by := map[string][]float64{}
	for i, ms := range metrics {
		if !include(i) {
			continue
		}
		for j, m := range ms {
			if s := solos[i][j]; s > 0 {
				by[m.figure()] = append(by[m.figure()], m.value/s)
			}
		}
	}
	out := make(map[string]float64, len(by))
	for f, rs := range by {
		if r := median(rs); r > 0 && r <= predictor.MaxNaiveRatio {
			out[f] = r
		}
	}
	return out
}

// median sorts xs in place and returns its median (linear between the two
// middle values).
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// blendItem is one held-out metric: measured, the simulator's prediction
// and the naive one, both by fits that did not see its fold.
type blendItem struct {
	fold                 int
	measured, sim, naive float64
}

// blendMAPE is the mean absolute percentage error of the blend at weight
// w over the items include accepts, and how many it counted.
func blendMAPE(items []blendItem, w float64, include func(fold int) bool) (float64, int) {
	var sum float64
	var n int
	for _, it := range items {
		if include(it.fold) {
			sum += math.Abs(w*it.sim+(1-w)*it.naive-it.measured) / it.measured
			n++
		}
	}
	if n == 0 {
		return math.Inf(1), 0
	}
	return sum / float64(n), n
}

// bestWeight is the grid's weight with the smallest error over the items
// include accepts; ties go to the larger weight (the simulator, which sees
// the co-runner), and with no item it is 1.
func bestWeight(items []blendItem, include func(fold int) bool) float64 {
	best, bestE := 1.0, math.Inf(1)
	for _, w := range slices.Backward(BlendWeights) {
		if e, n := blendMAPE(items, w, include); n > 0 && e < bestE-1e-12 {
			best, bestE = w, e
		}
	}
	return best
}

// chooseBlend fits the naive slowdown on the records (one median ratio of
// measured to solo per figure), writes each metric's naive predictions into
// rep (in-sample, and held out on the folds of the fit's cross-validation,
// whose simulator predictions rep already holds), and chooses the blend's
// weight on the grid by the held-out error over every fold. The blend's
// reported error is nested: each fold is scored with the weight chosen on
// the other folds alone. It returns nil when nothing was held out.
func chooseBlend(metrics [][]metric, preds []*predictor.Prediction, rep *predictor.FitReport, folds [][]int, how string) *predictor.Blend {
	if len(folds) < 2 {
		return nil
	}
	solos := make([][]float64, len(metrics))
	for i, ms := range metrics {
		for _, m := range ms {
			solos[i] = append(solos[i], m.solo(preds[i]))
		}
	}
	full := naiveRatios(metrics, solos, func(int) bool { return true })
	for i, ms := range metrics {
		for j, m := range ms {
			if r, ok := full[m.figure()]; ok && solos[i][j] > 0 {
				v := r * solos[i][j]
				rep.PerRecord[i].Metrics[j].Naive = &v
			}
		}
	}
	var items []blendItem
	for f, held := range folds {
		ratios := naiveRatios(metrics, solos, func(i int) bool { return !slices.Contains(held, i) })
		for _, i := range held {
			for j, m := range metrics[i] {
				mf := &rep.PerRecord[i].Metrics[j]
				r, ok := ratios[m.figure()]
				if !ok || !(solos[i][j] > 0) {
					continue
				}
				v := r * solos[i][j]
				mf.CVNaive = &v
				if mf.CVPredicted != nil {
					items = append(items, blendItem{fold: f, measured: m.value, sim: *mf.CVPredicted, naive: v})
				}
			}
		}
	}
	if len(items) == 0 {
		return nil
	}
	all := func(int) bool { return true }
	b := &predictor.Blend{NaiveRatio: full, CV: how}
	for _, w := range BlendWeights {
		e, _ := blendMAPE(items, w, all)
		b.Grid = append(b.Grid, predictor.BlendPoint{Weight: w, CVMAPE: e})
	}
	w := bestWeight(items, all)
	b.Weight = &w
	// Nested: each fold with the weight the other folds choose.
	var sum float64
	for f := range folds {
		fw := bestWeight(items, func(g int) bool { return g != f })
		b.FoldWeights = append(b.FoldWeights, fw)
		e, n := blendMAPE(items, fw, func(g int) bool { return g == f })
		if n > 0 {
			sum += e * float64(n)
		}
	}
	sim, n := blendMAPE(items, 1, all)
	naive, _ := blendMAPE(items, 0, all)
	b.CVMAPE = &predictor.BlendCV{Simulator: sim, Naive: naive, Blend: sum / float64(n), Metrics: n}
	return b
}
