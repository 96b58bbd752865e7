package calibrate

import (
	"math"

	"github.com/colocd/colocd/predictor"

	"gonum.org/v1/gonum/mat"
)

// pinMPS reports each stage-2 coefficient's 95 % interval from the
// curvature of the objective at the fit (the Gauss–Newton approximation:
// covariance σ²·(JᵀJ)⁻¹, J the Jacobian of the weighted relative errors),
// with σ² the records' residual error (never below the assumed noise) and
// the covariance scaled by metrics/records, since the metrics of one record
// share its arrivals and their errors move together. A coefficient is
// pinned by the records when the interval's half-width is at most the
// value (or 0.05, for a value near 0); the fit has no prior, so otherwise
// by none. Coefficients are ≥ 0: the low end stops at 0.
func (o *mpsObjective) pinMPS(best predictor.MPSParams, include func(int) bool) ([]predictor.ParameterFit, error) {
	beta := best.Vector()
	r0, err := o.residuals(best, include)
	if err != nil {
		return nil, err
	}
	n, k := len(r0), len(beta)
	jac := mat.NewDense(n, k, nil)
	for j := range beta {
		b := beta
		b[j] += fdStep
		rj, err := o.residuals(predictor.MPSParamsFrom(b[:]), include)
		if err != nil {
			return nil, err
		}
		for i := range r0 {
			jac.Set(i, j, (rj[i]-r0[i])/fdStep)
		}
	}
	records := 0
	for i := range o.recs {
		if include(i) {
			records++
		}
	}
	// σ² per metric: the residuals' mean square, never below the noise.
	noise := o.opts.noise()
	s2 := noise * noise
	if dof := n - k; dof >= 1 {
		s2 = max(s2, sumSquares(r0)/float64(dof))
	}
	var jtj mat.SymDense
	jtj.SymOuterK(1, jac.T())
	var cov mat.Dense
	out := make([]predictor.ParameterFit, k)
	singular := cov.Inverse(&jtj) != nil
	// n metrics that carry the evidence of only as many records.
	scale := s2 * float64(n) / float64(max(records, 1))
	for j := range beta {
		pf := predictor.ParameterFit{Name: predictor.MPSFeatures[j], Value: beta[j], PinnedBy: predictor.PinnedByNone}
		if v := cov.At(j, j); !singular && v >= 0 && !math.IsInf(v, 0) {
			h := 1.96 * math.Sqrt(v*scale)
			lo, hi := max(0, beta[j]-h), beta[j]+h
			pf.Low, pf.High = &lo, &hi
			if h <= max(beta[j], 0.05) {
				pf.PinnedBy = predictor.PinnedByRecords
			}
		}
		out[j] = pf
	}
	return out, nil
}
