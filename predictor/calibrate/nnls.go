package calibrate

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/mat"
)

// errNNLSIterations is returned when Lawson–Hanson does not converge.
var errNNLSIterations = errors.New("nnls: too many iterations")

// nnls solves min ‖A·x − b‖₂ subject to x ≥ 0 by the Lawson–Hanson active-set
// method (Solving Least Squares Problems, 1974, ch. 23). gonum has no
// constrained least squares; the unconstrained sub-problems use its QR.
func nnls(a *mat.Dense, b []float64) ([]float64, error) {
	m, n := a.Dims()
	bv := mat.NewVecDense(m, b)
	x := make([]float64, n)
	passive := make([]bool, n)
	// The Kuhn–Tucker tolerance scales with the problem (as in SciPy's
	// nnls): a fixed one stops too early on tiny entries and cycles on big ones.
	tol := 10 * float64(max(m, n)) * 2.220446049250313e-16 * maxAbs(a.RawMatrix().Data) * max(maxAbs(b), 1e-300)
	w := make([]float64, n)
	skip := make([]bool, n) // columns whose entry made no progress this round
	// gradient w = Aᵀ(b − A·x)
	gradient := func() {
		r := mat.NewVecDense(m, nil)
		r.MulVec(a, mat.NewVecDense(n, x))
		r.SubVec(bv, r)
		var g mat.VecDense
		g.MulVec(a.T(), r)
		for j := range w {
			w[j] = g.AtVec(j)
		}
	}
	for outer := 0; outer < 3*n+10; outer++ {
		gradient()
		best, bestJ := tol, -1
		for j := range n {
			if !passive[j] && !skip[j] && w[j] > best {
				best, bestJ = w[j], j
			}
		}
		if bestJ < 0 {
			return x, nil // Kuhn–Tucker conditions hold
		}
		passive[bestJ] = true
		// A column whose unconstrained coefficient is not positive on entry
		// cannot improve the fit (rounding): leave it out and try the next.
		if z, err := lsqSubset(a, bv, passive); err == nil && z[bestJ] <= 0 {
			passive[bestJ] = false
			skip[bestJ] = true
			continue
		}
		clear(skip)
		for inner := 0; ; inner++ {
			if inner > 3*n+10 {
				return nil, errNNLSIterations
			}
			z, err := lsqSubset(a, bv, passive)
			if err != nil {
				return nil, err
			}
			if allPositive(z, passive) {
				copy(x, z)
				break
			}
			// Step from x toward z as far as feasibility allows, and drop
			// the variables that hit zero from the passive set.
			alpha := math.Inf(1)
			for j := range n {
				if passive[j] && z[j] <= 0 {
					alpha = min(alpha, x[j]/(x[j]-z[j]))
				}
			}
			for j := range n {
				x[j] += alpha * (z[j] - x[j])
				if passive[j] && x[j] <= tol {
					passive[j] = false
					x[j] = 0
				}
			}
		}
	}
	return nil, errNNLSIterations
}

// lsqSubset solves the unconstrained least squares on the passive columns
// and returns a full-length vector (zeros elsewhere).
func lsqSubset(a *mat.Dense, b *mat.VecDense, passive []bool) ([]float64, error) {
	m, n := a.Dims()
	var cols []int
	for j := range n {
		if passive[j] {
			cols = append(cols, j)
		}
	}
	sub := mat.NewDense(m, len(cols), nil)
	for k, j := range cols {
		for i := range m {
			sub.Set(i, k, a.At(i, j))
		}
	}
	var sol mat.VecDense
	if err := sol.SolveVec(sub, b); err != nil {
		// A rank-deficient sub-problem: fall back to the minimum-norm
		// solution through the normal equations with a tiny ridge.
		var ata mat.Dense
		ata.Mul(sub.T(), sub)
		for k := range cols {
			ata.Set(k, k, ata.At(k, k)+1e-12)
		}
		var atb mat.VecDense
		atb.MulVec(sub.T(), b)
		if err := sol.SolveVec(&ata, &atb); err != nil {
			return nil, err
		}
	}
	z := make([]float64, n)
	for k, j := range cols {
		z[j] = sol.AtVec(k)
	}
	return z, nil
}

func allPositive(z []float64, passive []bool) bool {
	for j, p := range passive {
		if p && z[j] <= 0 {
			return false
		}
	}
	return true
}

func maxAbs(xs []float64) float64 {
	var m float64
	for _, v := range xs {
		m = max(m, math.Abs(v))
	}
	return m
}
