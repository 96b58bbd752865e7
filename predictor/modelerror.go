package predictor

import (
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// minModelErrorValues is the fewest degrees of freedom of a figure's
// misses whose spread is trusted alone; with fewer, the spread of every
// figure of the same kind (latency or service) stands in.
const minModelErrorValues = 3

// ModelErrorSD returns, for the figure field ("latency_ms.p99",
// "service_ms.mean", …), the standard deviation of log(predicted /
// measured) over the fit's records (ModelError).
func (f *FitReport) ModelErrorSD(field string) float64 {
	sd, _ := f.ModelError(field)
	return sd
}

// ModelError returns the spread of log(predicted / measured) for the figure
// field over the fit's records, and its degrees of freedom. Each record
// counts with its leave-one-out prediction where the fit was
// cross-validated: those misses are out of sample, and n of them have n
// degrees of freedom. Where a record has only its in-sample prediction, the
// fit chose its parameters to make those misses small, so the spread is
// taken over n − p degrees of freedom, p the fitted parameters (the
// textbook residual variance). It falls back to every figure of the field's
// kind when the field alone has fewer than minModelErrorValues degrees of
// freedom, and returns 0, 0 when there are none. The root mean square is
// about zero, not about the mean: a biased model's bias is part of its
// error.
func (f *FitReport) ModelError(field string) (sd float64, df int) {
	return f.misses(field).spread()
}

// ModelErrorBound returns the half-width, in log space, of the model's own
// error for the figure field at the given confidence: the measured value
// lies within a factor exp(±bound) of the prediction. It is t·sd, t the
// quantile of Student's t with ModelError's degrees of freedom; and where
// the misses are out of sample (a cross-validated fit), never less than the
// k-th smallest of their n absolute values, k = ⌈confidence·(n+1)⌉ (at most
// n). That floor is the split-conformal bound: if the next record's miss is
// exchangeable with the cross-validated ones, it lies within it with at
// least the confidence's probability whatever their distribution, where
// the t bound assumes log-normal misses and falls short when a few of them
// are large (a bias next to one trainer). With fewer misses than the level
// needs (k > n) the largest one is the floor. In-sample misses are too
// small to be such a floor and get the t bound alone.
func (f *FitReport) ModelErrorBound(field string, confidence float64) float64 {
	m := f.misses(field)
	sd, df := m.spread()
	if !(sd > 0) {
		return 0
	}
	bound := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile((1+confidence)/2) * sd
	if !m.inSample {
		n := len(m.logs)
		k := min(n, int(math.Ceil(confidence*float64(n+1)-1e-9)))
		for i, l := range m.logs { // misses' own slice: sorted in place
			m.logs[i] = math.Abs(l)
		}
		slices.Sort(m.logs)
		bound = max(bound, m.logs[max(k, 1)-1])
	}
	return bound
}

// modelMisses are the log misses, log(predicted / measured), that
// ModelError reads for one figure, and their degrees of freedom.
type modelMisses struct {
	logs     []float64
	dof      int
	inSample bool // some miss is an in-sample one
}

// spread is ModelError's root mean square and degrees of freedom.
func (m modelMisses) spread() (sd float64, df int) {
	if len(m.logs) == 0 {
		return 0, 0
	}
	var ss float64
	for _, l := range m.logs {
		ss += l * l
	}
	df = max(1, m.dof)
	return math.Sqrt(ss / float64(df)), df
}

// misses collects the figure's misses, or every figure's of its kind when
// the figure alone has fewer than minModelErrorValues degrees of freedom
// (ModelError).
func (f *FitReport) misses(field string) modelMisses {
	if f == nil {
		return modelMisses{}
	}
	kind, _, _ := strings.Cut(field, ".")
	var exact, same modelMisses
	for _, r := range f.PerRecord {
		for _, m := range r.Metrics {
			p, in := m.Predicted, true
			if m.CVPredicted != nil {
				p, in = *m.CVPredicted, false
			}
			if !(p > 0) || !(m.Measured > 0) {
				continue
			}
			l := math.Log(p / m.Measured)
			add := func(x *modelMisses) { x.logs, x.inSample = append(x.logs, l), x.inSample || in }
			if m.Field == field {
				add(&exact)
			}
			if k, _, _ := strings.Cut(m.Field, "."); k == kind {
				add(&same)
			}
		}
	}
	for _, x := range []*modelMisses{&exact, &same} {
		x.dof = len(x.logs)
		if x.inSample {
			x.dof -= len(f.Parameters)
		}
	}
	if exact.dof < minModelErrorValues {
		return same
	}
	return exact
}

// WidenByModelError widens every service's intervals in pred by the model's
// own error as the calibration's fit measured it (ModelErrorBound, per
// figure): at the intervals' confidence, the measured value lies within a
// factor exp(±bound) of the prediction. That factor's rise and fall add in
// quadrature to the interval's half-widths, as the parameter uncertainty's
// do. Without per-record figures the intervals are left as they are. It
// reports whether it widened anything.
func WidenByModelError(fit *FitReport, pred *Prediction) bool {
	if fit == nil || len(fit.PerRecord) == 0 {
		return false
	}
	widened := false
	widen := func(kind string, iv *Intervals, point Percentiles) (did bool) {
		iv.each(func(key string, in *Interval) {
			bound := fit.ModelErrorBound(kind+"."+key, iv.Confidence)
			c, _ := point.Get(key)
			if !(bound > 0) || !(c > 0) {
				return
			}
			up, down := c*(math.Exp(bound)-1), c*(1-math.Exp(-bound))
			in.addInQuadrature(c, up*up, down*down)
			did = true
		})
		return did
	}
	for j := range pred.Services {
		sp := &pred.Services[j]
		l := widen("latency_ms", &sp.LatencyInterval, sp.LatencyMS)
		s := widen("service_ms", &sp.ServiceInterval, sp.ServiceMS)
		if l || s {
			sp.ModelUncertainty, widened = true, true
		}
	}
	if len(pred.Services) > 0 {
		pred.Inference = pred.Services[0]
	}
	return widened
}
