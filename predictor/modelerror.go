package predictor

import (
	"math"
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
	if f == nil {
		return 0, 0
	}
	kind, _, _ := strings.Cut(field, ".")
	type misses struct {
		ss       float64
		n        int
		inSample bool
	}
	var exact, same misses
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
			add := func(x *misses) { x.ss, x.n, x.inSample = x.ss+l*l, x.n+1, x.inSample || in }
			if m.Field == field {
				add(&exact)
			}
			if k, _, _ := strings.Cut(m.Field, "."); k == kind {
				add(&same)
			}
		}
	}
	dof := func(x misses) int {
		if x.inSample {
			return x.n - len(f.Parameters)
		}
		return x.n
	}
	x := exact
	if dof(x) < minModelErrorValues {
		x = same
	}
	if x.n == 0 {
		return 0, 0
	}
	df = max(1, dof(x))
	return math.Sqrt(x.ss / float64(df)), df
}

// WidenByModelError widens every service's intervals in pred by the model's
// own error as the calibration's fit measured it (ModelError, per figure):
// at the intervals' confidence, the measured value lies within a factor
// exp(±t·sd) of the prediction, t the quantile of Student's t with the
// spread's degrees of freedom. That factor's rise and fall add in
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
			sd, df := fit.ModelError(kind + "." + key)
			c, _ := point.Get(key)
			if !(sd > 0) || !(c > 0) {
				return
			}
			// Student's t: the spread itself is estimated from df misses.
			z := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile((1 + iv.Confidence) / 2)
			up, down := c*(math.Exp(z*sd)-1), c*(1-math.Exp(-z*sd))
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
