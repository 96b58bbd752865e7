package predictor

import (
	"math"
	"slices"
)

// Percentiles summarises one per-request quantity in milliseconds.
type Percentiles struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
}

// percentilesUS sorts xs (µs) in place and returns their summary in ms.
// Quantiles interpolate linearly between closest ranks (the R-7 / NumPy
// default), so that p99 of a few hundred requests does not jump between
// samples.
func percentilesUS(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return Percentiles{
		Mean: sum / float64(len(xs)) / 1000,
		P50:  quantileSorted(xs, 0.50) / 1000,
		P90:  quantileSorted(xs, 0.90) / 1000,
		P95:  quantileSorted(xs, 0.95) / 1000,
		P99:  quantileSorted(xs, 0.99) / 1000,
	}
}

// quantileSorted returns the q-quantile of sorted xs by linear interpolation.
func quantileSorted(xs []float64, q float64) float64 {
	h := q * float64(len(xs)-1)
	lo := math.Floor(h)
	i := int(lo)
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	return xs[i] + (h-lo)*(xs[i+1]-xs[i])
}

// Get returns the named percentile ("mean", "p50", "p90", "p95", "p99") and
// whether the name is known.
func (p Percentiles) Get(key string) (float64, bool) {
	switch key {
	case "mean":
		return p.Mean, true
	case "p50":
		return p.P50, true
	case "p90":
		return p.P90, true
	case "p95":
		return p.P95, true
	case "p99":
		return p.P99, true
	}
	return 0, false
}

// PercentileKeys are the keys of Percentiles in JSON order.
var PercentileKeys = []string{"mean", "p50", "p90", "p95", "p99"}
