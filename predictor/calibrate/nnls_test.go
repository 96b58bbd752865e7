package calibrate

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestNNLS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a    []float64 // rows × 3
		b    []float64
		want []float64
	}{
		{
			name: "interior solution equals least squares",
			a:    []float64{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1},
			b:    []float64{1, 2, 3, 6},
			want: []float64{1, 2, 3},
		},
		{
			// Unconstrained: x = (2, -1, 0); the constraint pins x1 at 0.
			name: "negative component clamped",
			a:    []float64{1, 0, 0, 0, 1, 0, 0, 0, 1},
			b:    []float64{2, -1, 0.5},
			want: []float64{2, 0, 0.5},
		},
		{
			// Every column has non-negative entries and b is negative:
			// any positive x only makes the residual worse.
			name: "all zero when b is negative",
			a:    []float64{1, 1, 0, 1, 0, 1, 0, 1, 1},
			b:    []float64{-1, -2, -3},
			want: []float64{0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mat.NewDense(len(tt.b), 3, tt.a)
			got, err := nnls(a, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			for j := range got {
				if math.Abs(got[j]-tt.want[j]) > 1e-9 {
					t.Fatalf("x = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// On random problems the solution satisfies the Kuhn–Tucker conditions:
// x ≥ 0, gradient ≤ 0 where x = 0 and ≈ 0 where x > 0, whatever the scale
// of the entries and with nearly collinear columns.
func TestNNLSKuhnTucker(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		m, n := 1+rng.IntN(10), 1+rng.IntN(5)
		scale := math.Pow(10, float64(rng.IntN(9)-4)) // 1e-4 … 1e4
		data := make([]float64, m*n)
		for i := range data {
			data[i] = scale * rng.NormFloat64()
		}
		if n > 1 { // a nearly collinear pair
			for i := range m {
				data[i*n+1] = data[i*n] * (1 + 1e-7*rng.NormFloat64())
			}
		}
		b := make([]float64, m)
		for i := range b {
			b[i] = rng.NormFloat64()
		}
		a := mat.NewDense(m, n, data)
		x, err := nnls(a, b)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		r := mat.NewVecDense(m, nil)
		r.MulVec(a, mat.NewVecDense(n, x))
		r.SubVec(mat.NewVecDense(m, b), r)
		var g mat.VecDense
		g.MulVec(a.T(), r)
		// Gradient tolerance relative to the problem's scale.
		tol := 1e-9 * scale * (1 + mat.Norm(mat.NewVecDense(m, b), 2)) * float64(m)
		for j := range n {
			switch {
			case x[j] < 0:
				t.Fatalf("trial %d: x[%d] = %v < 0", trial, j, x[j])
			case x[j] > 0 && math.Abs(g.AtVec(j)) > tol:
				t.Fatalf("trial %d (scale %g): x[%d] = %v > 0 but gradient %v", trial, scale, j, x[j], g.AtVec(j))
			case x[j] == 0 && g.AtVec(j) > tol:
				t.Fatalf("trial %d (scale %g): x[%d] = 0 but gradient %v > 0 (could improve)", trial, scale, j, g.AtVec(j))
			}
		}
	}
}
