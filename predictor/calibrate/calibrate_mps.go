package calibrate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/colocd/colocd/predictor"

	"gonum.org/v1/gonum/mat"
)

// mpsObjective scores stage-2 coefficients against a set of MPS records.
type mpsObjective struct {
	// cancelled is the fit context's Err: gonum calls the objective with
	// no context, and a cancelled fit must stop simulating at once.
	cancelled func() error
	recs      []*Record
	metrics   [][]metric
	opts      FitOptions
	sms       int
	preds     []predictor.Predictor
	evals     int
}

func newMPSObjective(ctx context.Context, recs []*Record, opts FitOptions, sms int) *mpsObjective {
	o := &mpsObjective{cancelled: ctx.Err, recs: recs, opts: opts, sms: sms, preds: make([]predictor.Predictor, len(recs))}
	for i, r := range recs {
		o.metrics = append(o.metrics, r.metrics(i))
	}
	return o
}

// predictAll predicts the records include accepts, in parallel.
func (o *mpsObjective) predictAll(p predictor.MPSParams, include func(int) bool) ([]*predictor.Prediction, error) {
	if err := o.cancelled(); err != nil {
		return nil, err
	}
	o.evals++
	return predictRecords(len(o.recs), o.opts.Workers, func(i int) bool { return !include(i) }, func(i int) (*predictor.Prediction, error) {
		return predictSeeds(o.opts, o.recs[i].scenario(o.opts, o.sms), func(sc *predictor.Scenario) (*predictor.Prediction, error) {
			return o.preds[i].PredictMPS(sc, p)
		})
	})
}

// residuals returns, for every metric of the records include accepts, the
// relative error (predicted − measured) / measured times the square root
// of the metric's weight.
func (o *mpsObjective) residuals(p predictor.MPSParams, include func(int) bool) ([]float64, error) {
	preds, err := o.predictAll(p, include)
	if err != nil {
		return nil, err
	}
	var r []float64
	for i, ms := range o.metrics {
		if !include(i) {
			continue
		}
		for _, m := range ms {
			v := m.predicted(preds[i])
			if math.IsNaN(v) {
				v = m.value // nothing to compare: contributes no error
			}
			r = append(r, math.Sqrt(weightOf(o.opts.weights(), m))*(v-m.value)/m.value)
		}
	}
	return r, nil
}

func sumSquares(r []float64) float64 {
	var s float64
	for _, v := range r {
		s += v * v
	}
	return s
}

// fdStep is the finite-difference step of the Jacobian, in coefficient units.
const fdStep = 0.05

// fit finds non-negative coefficients minimising the squared relative error
// over the records include accepts: Gauss–Newton steps whose linear
// sub-problem is solved by non-negative least squares (Lawson–Hanson), with
// the Jacobian from forward differences and a halving line search.
func (o *mpsObjective) fit(ctx context.Context, include func(int) bool) (predictor.MPSParams, error) {
	beta := make([]float64, len(predictor.MPSFeatures))
	r0, err := o.residuals(predictor.MPSParamsFrom(beta), include)
	if err != nil {
		return predictor.MPSParams{}, err
	}
	f0 := sumSquares(r0)
	for iter := 0; iter < 12; iter++ {
		if err := ctx.Err(); err != nil {
			return predictor.MPSParams{}, err
		}
		jac := mat.NewDense(len(r0), len(beta), nil)
		for j := range beta {
			b := slices.Clone(beta)
			b[j] += fdStep
			rj, err := o.residuals(predictor.MPSParamsFrom(b), include)
			if err != nil {
				return predictor.MPSParams{}, err
			}
			for i := range r0 {
				jac.Set(i, j, (rj[i]-r0[i])/fdStep)
			}
		}
		// r(β') ≈ r0 + J(β' − β) = 0  ⇔  J β' = J β − r0, with β' ≥ 0.
		target := make([]float64, len(r0))
		for i := range target {
			target[i] = -r0[i]
			for j := range beta {
				target[i] += jac.At(i, j) * beta[j]
			}
		}
		next, err := nnls(jac, target)
		if err != nil {
			return predictor.MPSParams{}, fmt.Errorf("gauss-newton step: %w", err)
		}
		// Halve the step until the error does not grow.
		improved := false
		for step := 1.0; step > 1.0/64; step /= 2 {
			b := make([]float64, len(beta))
			for j := range b {
				b[j] = max(0, beta[j]+step*(next[j]-beta[j]))
			}
			r, err := o.residuals(predictor.MPSParamsFrom(b), include)
			if err != nil {
				return predictor.MPSParams{}, err
			}
			if f := sumSquares(r); f <= f0 {
				moved := 0.0
				for j := range b {
					moved = max(moved, math.Abs(b[j]-beta[j]))
				}
				beta, r0, f0, improved = b, r, f, true
				if moved < 1e-4 {
					return predictor.MPSParamsFrom(beta), nil
				}
				break
			}
		}
		if !improved {
			break
		}
	}
	return predictor.MPSParamsFrom(beta), nil
}

// workloadKey names a record's training workload set, for
// leave-one-workload-out.
func (r *Record) workloadKey() string {
	names := make([]string, len(r.Training))
	for i, t := range r.Training {
		names[i] = t.Profile.Name
	}
	slices.Sort(names)
	return strings.Join(names, "+")
}

// FitMPS fits the MPS model's stage-2 coefficients to the MPS records of m
// and reports the fit's MAPE in-sample and, when asked, leave-one-workload-out:
// every record of one training workload predicted by a fit that never saw
// that workload.
func FitMPS(ctx context.Context, m *Measurements, opts FitOptions) (*predictor.MPSCalibration, error) {
	recs, err := m.fitRecords(predictor.ModeMPS, &opts)
	if err != nil {
		return nil, err
	}
	obj := newMPSObjective(ctx, recs, opts, m.Device.SMs)
	all := func(int) bool { return true }
	if !slices.ContainsFunc(obj.metrics, func(ms []metric) bool {
		return slices.ContainsFunc(ms, func(mt metric) bool { return weightOf(opts.weights(), mt) > 0 })
	}) {
		return nil, fmt.Errorf("fit mps: %w: no record measured a metric whose weight is above 0 (weights %v)", ErrNoRecords, opts.weights())
	}
	best, err := obj.fit(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("fit mps: %w", err)
	}
	preds, err := obj.predictAll(best, all)
	if err != nil {
		return nil, fmt.Errorf("fit mps: %w", err)
	}
	mape, _ := scoreMetrics(obj.metrics, preds, nil, all)
	rep := fitReport(recs, obj.metrics, preds, mape, opts, len(predictor.MPSFeatures))
	if rep.Parameters, err = obj.pinMPS(best, all); err != nil {
		return nil, fmt.Errorf("fit mps: %w", err)
	}
	rep.Unidentified = unidentified(rep.Parameters)
	if opts.CrossValidate {
		cv, ok, err := obj.leaveOneWorkloadOut(ctx, rep)
		if err != nil {
			return nil, fmt.Errorf("fit mps: cross-validate: %w", err)
		}
		if ok {
			rep.CVMAPE, rep.CV = &cv, cvWorkload
		}
	}
	blend := cvBlend(opts, recs, obj.metrics, preds, rep, false)
	rep.Evaluations = obj.evals
	coef := map[string]float64{}
	for i, v := range best.Vector() {
		coef[predictor.MPSFeatures[i]] = v
	}
	return &predictor.MPSCalibration{Coefficients: coef, Fit: rep, Blend: blend}, nil
}

// leaveOneWorkloadOut refits without each training workload in turn and
// scores its records; ok is false with fewer than two workloads.
func (o *mpsObjective) leaveOneWorkloadOut(ctx context.Context, rep *predictor.FitReport) (float64, bool, error) {
	groups, _ := cvGroups(o.recs, false)
	if len(groups) < 2 {
		return 0, false, nil
	}
	var cv cvScore
	for _, held := range groups {
		p, err := o.fit(ctx, func(i int) bool { return !slices.Contains(held, i) })
		if err != nil {
			return 0, false, err
		}
		preds, err := o.predictAll(p, func(i int) bool { return slices.Contains(held, i) })
		if err != nil {
			return 0, false, err
		}
		for _, i := range held {
			cv.add(rep, o.metrics, i, preds[i])
		}
	}
	mape, ok := cv.mape()
	return mape, ok, nil
}
