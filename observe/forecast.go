package observe

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/colocd/colocd/field"
)

// Forecast is how the guard forecasts a service's load from its observed
// request rate (the service's metrics.forecast section): Holt's constants,
// how far ahead, and how much of the load's burstiness beyond Poisson
// arrivals it adds. Zero fields take the defaults.
type Forecast struct {
	// Alpha and Beta smooth the level and the trend, in (0, 1].
	Alpha float64 `mapstructure:"alpha"`
	Beta  float64 `mapstructure:"beta"`
	// Phi damps the trend, in (0, 1] (1: undamped).
	Phi float64 `mapstructure:"phi"`
	// Horizon is how far ahead the rate is forecast (0: DefaultHorizon).
	Horizon time.Duration `mapstructure:"horizon"`
	// Burst is how many standard deviations of the window's rate beyond
	// what Poisson arrivals at its mean would show are added to the
	// forecast: the predictor simulates Poisson arrivals, and a burstier
	// load needs more room at the same mean (0: DefaultBurst; a negative
	// value, none).
	Burst float64 `mapstructure:"burst"`
}

// DefaultBurst is Forecast.Burst's default (see DefaultAlpha).
const DefaultBurst = 0.5

// MaxBurst bounds Forecast.Burst.
const MaxBurst = 10

// Validate names every bad value under prefix ("services[0].metrics.forecast").
func (f Forecast) Validate(c *field.Checker, prefix string) {
	frac := func(k string, v float64) {
		if !(v >= 0 && v <= 1) {
			c.Add(prefix+"."+k, "a fraction in (0, 1] (0: the default)", strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	frac("alpha", f.Alpha)
	frac("beta", f.Beta)
	frac("phi", f.Phi)
	if f.Horizon < 0 || f.Horizon > MaxWindow {
		c.Add(prefix+".horizon", fmt.Sprintf("a duration from 0 (%s) to %s", DefaultHorizon, MaxWindow), f.Horizon.String())
	}
	if !(f.Burst >= -1 && f.Burst <= MaxBurst) {
		c.Add(prefix+".burst", fmt.Sprintf("a number of standard deviations from 0 to %d (0: the default, -1: none)", MaxBurst), strconv.FormatFloat(f.Burst, 'g', -1, 64))
	}
}

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

// Defaults of Holt and Forecast.Burst, chosen by cross-validation across
// two Azure LLM traces, one smooth and one bursty, leaving each out in turn
// (tools/guard-tuning/cv.py, docs/guard.md#the-forecast): a slow level, a
// trend of a few samples, damped hard, and half a standard deviation of
// the rate's burstiness beyond Poisson arrivals'. Before, a level that
// followed every 5 s burst (0.5) overshot bursty loads tenfold.
const (
	DefaultAlpha = 0.2
	DefaultBeta  = 0.3
	DefaultPhi   = 0.8
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
