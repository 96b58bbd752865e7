package predictor

import (
	"math"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// minModelErrorValues is the fewest measured values of a figure whose
// spread is trusted alone; with fewer, the spread of every figure of the
// same kind (latency or service) stands in.
const minModelErrorValues = 3

// ModelErrorSD returns, for the figure field ("latency_ms.p99",
// "service_ms.mean", …), the standard deviation of log(predicted /
// measured) over the fit's records: each record's leave-one-out prediction
// where the fit was cross-validated, else its in-sample one. It falls back
// to every figure of the field's kind when the field has fewer than
// minModelErrorValues values, and returns 0 when there are none. The root
// mean square is about zero, not about the mean: a biased model's bias is
// part of its error.
func (f *FitReport) ModelErrorSD(field string) float64 {
	if f == nil {
		return 0
	}
	kind, _, _ := strings.Cut(field, ".")
	var exact, same []float64
	for _, r := range f.PerRecord {
		for _, m := range r.Metrics {
			p := m.Predicted
			if m.CVPredicted != nil {
				p = *m.CVPredicted
			}
			if !(p > 0) || !(m.Measured > 0) {
				continue
			}
			l := math.Log(p / m.Measured)
			if m.Field == field {
				exact = append(exact, l)
			}
			if k, _, _ := strings.Cut(m.Field, "."); k == kind {
				same = append(same, l)
			}
		}
	}
	xs := exact
	if len(xs) < minModelErrorValues {
		xs = same
	}
	if len(xs) == 0 {
		return 0
	}
	var ss float64
	for _, x := range xs {
		ss += x * x
	}
	return math.Sqrt(ss / float64(len(xs)))
}

// WidenByModelError widens every service's intervals in pred by the model's
// own error as the calibration's fit measured it (ModelErrorSD, per
// figure): at the intervals' confidence, the measured value lies within a
// factor exp(±z·sd) of the prediction, z the normal quantile. That factor's
// rise and fall add in quadrature to the interval's half-widths, as the
// parameter uncertainty's do. Without per-record figures the intervals are
// left as they are. It reports whether it widened anything.
func WidenByModelError(fit *FitReport, pred *Prediction) bool {
	if fit == nil || len(fit.PerRecord) == 0 {
		return false
	}
	widened := false
	widen := func(kind string, iv *Intervals, point Percentiles) (did bool) {
		z := distuv.UnitNormal.Quantile((1 + iv.Confidence) / 2)
		iv.each(func(key string, in *Interval) {
			sd := fit.ModelErrorSD(kind + "." + key)
			c, _ := point.Get(key)
			if !(sd > 0) || !(c > 0) {
				return
			}
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
