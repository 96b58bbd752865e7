package observe

import "math"

// Holt is Holt's linear trend method (double exponential smoothing) on a
// series sampled at a steady interval, with the trend damped (Gardner and
// McKenzie): a level and a trend, each smoothed, so that a forecast h steps
// ahead is level + (φ + φ² + … + φʰ)·trend. The guard uses it on the
// request rate of each scrape interval to act before a rising load
// arrives, not after. The damping bounds what a noisy or one-off trend
// adds far ahead: at most φ/(1−φ) steps' worth (9 at the default).
type Holt struct {
	// Alpha and Beta smooth the level and the trend, in (0, 1]; zero
	// values take DefaultAlpha and DefaultBeta.
	Alpha, Beta float64
	// Phi damps the trend, in (0, 1] (1: the undamped linear trend); zero
	// takes DefaultPhi.
	Phi float64

	level, trend float64
	n            int
}

// Defaults of Holt: a level that follows a step within a few samples, a
// trend that needs a few samples of the same direction to build.
const (
	DefaultAlpha = 0.5
	DefaultBeta  = 0.3
	// DefaultPhi was chosen on the guard's replay of the Azure trace
	// (docs/guard.md#replay): against the undamped trend it kept the SLO in
	// every run and did more training work with a right predictor.
	DefaultPhi = 0.9
)

// Add takes the next sample; a NaN or infinite one is skipped.
func (h *Holt) Add(y float64) {
	if math.IsNaN(y) || math.IsInf(y, 0) {
		return
	}
	a, b := h.Alpha, h.Beta
	if a <= 0 || a > 1 {
		a = DefaultAlpha
	}
	if b <= 0 || b > 1 {
		b = DefaultBeta
	}
	switch h.n {
	case 0:
		h.level = y
	case 1:
		h.trend = y - h.level
		h.level = y
	default:
		prev := h.level
		h.level = a*y + (1-a)*(h.level+h.trend)
		h.trend = b*(h.level-prev) + (1-b)*h.trend
	}
	h.n++
}

// Forecast is the value expected steps samples ahead, never below zero;
// NaN before the first sample.
func (h *Holt) Forecast(steps float64) float64 {
	if h.n == 0 {
		return math.NaN()
	}
	phi := h.Phi
	if phi <= 0 || phi > 1 {
		phi = DefaultPhi
	}
	if phi == 1 {
		return max(0, h.level+steps*h.trend)
	}
	return max(0, h.level+h.trend*phi*(1-math.Pow(phi, steps))/(1-phi))
}

// Reset forgets every sample.
func (h *Holt) Reset() { h.level, h.trend, h.n = 0, 0, 0 }
