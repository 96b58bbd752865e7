package calibrate

import (
	"context"
	"math"
	"slices"

	"github.com/colocd/colocd/predictor"
)

// chi2_95 is the 95 % quantile of χ² with one degree of freedom: a profile
// likelihood interval holds the values whose log-likelihood is within
// chi2_95/2 of the best.
const chi2_95 = 3.841

// pinLadder are the factors tried on each side of a fitted value, out to
// the searched range's end.
var pinLadder = []float64{1.05, 1.1, 1.2, 1.35, 1.5, 2, 3, 5, 8}

// threshold is how far the profile loss may rise above the best loss
// inside the 95 % interval. The loss is 2σ²/n times the negative log
// likelihood (n independent errors), so the rise is chi2_95·σ²/n, with σ
// the records' residual error (n·msle/(n−k) with k parameters, never below
// the assumed noise, which also stands in when the records are too few to
// estimate it).
func (o *tsObjective) threshold(msle float64) float64 {
	n := o.independent(nil)
	noise := o.opts.noise()
	s2 := noise * noise
	if dof := n - float64(len(tsNames)); dof >= 1 {
		s2 = max(s2, n*msle/dof)
	}
	return chi2_95 * s2 / max(n, 1)
}

// pin reports each parameter's 95 % profile-likelihood interval around
// best: the parameter is moved outward along pinLadder, the others refitted
// by a short compass search, until the loss rises past threshold.
func (o *tsObjective) pin(ctx context.Context, best predictor.TimesliceParams, bestLoss, msle float64) []predictor.ParameterFit {
	limit := bestLoss + o.threshold(msle)
	x0 := fromParams(best)
	pr := o.opts.prior()
	out := make([]predictor.ParameterFit, len(x0))
	for i := range x0 {
		pf := predictor.ParameterFit{Name: tsNames[i], Value: math.Exp(x0[i])}
		for _, side := range []float64{1, -1} {
			// in is the last point inside the interval, out the first
			// outside (nil: none yet).
			in := slices.Clone(x0)
			var out []float64
			for _, f := range pinLadder {
				if ctx.Err() != nil {
					return nil
				}
				y := slices.Clone(in)
				y[i] = x0[i] + side*math.Log(f)
				if _, pen := toParams(y); pen > 0 {
					break // the searched range ends first: open
				}
				y, l := o.refitOthers(y, i)
				if l > limit {
					out = y
					break
				}
				in = y
			}
			var edge *float64
			if out != nil {
				// Halve the step between in and out three times: the
				// edge to within an eighth of the last ladder step.
				for range 3 {
					y := slices.Clone(in)
					y[i] = (in[i] + out[i]) / 2
					if y, l := o.refitOthers(y, i); l <= limit {
						in = y
					} else {
						out = y
					}
				}
				v := math.Exp(in[i])
				edge = &v
			}
			if side > 0 {
				pf.High = edge
			} else {
				pf.Low = edge
			}
		}
		pf.PinnedBy = pinnedBy(pf, pr, i)
		out[i] = pf
	}
	return out
}

// refitOthers moves every parameter but i by a short compass search from
// y and returns the point and its loss.
func (o *tsObjective) refitOthers(y []float64, i int) ([]float64, float64) {
	p, _ := toParams(y)
	return o.compass(y, o.loss(p, nil), nil, i, []float64{0.1, 0.03})
}

// pinnedBy says what sets parameter i: the records when its interval is
// narrower than a factor of 2 each way and than 80 % of the prior's own
// 95 % interval, the prior when one bounds it and the records do not, and
// nothing when no interval closes.
func pinnedBy(pf predictor.ParameterFit, pr *TimeslicePrior, i int) string {
	if pf.Low == nil || pf.High == nil {
		return predictor.PinnedByNone
	}
	width := math.Log(*pf.High / *pf.Low)
	narrow := width < 2*math.Log(2)
	if pr != nil && width >= 0.8*2*1.96*pr[i].LogSD {
		return predictor.PinnedByPrior
	}
	if narrow {
		return predictor.PinnedByRecords
	}
	if pr != nil {
		return predictor.PinnedByPrior
	}
	return predictor.PinnedByNone
}

// unidentified lists the parameters the records do not pin.
func unidentified(ps []predictor.ParameterFit) []string {
	var out []string
	for _, p := range ps {
		if p.PinnedBy != predictor.PinnedByRecords {
			out = append(out, p.Name)
		}
	}
	return out
}
