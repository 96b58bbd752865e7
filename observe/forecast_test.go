package observe

import (
	"math"
	"testing"
)

// TestHoltFollowsTrends: a constant is forecast as itself, a steady ramp
// ahead of its last sample by the ramp's slope, and a fall never below zero.
func TestHoltFollowsTrends(t *testing.T) {
	t.Parallel()
	var h Holt
	if !math.IsNaN(h.Forecast(3)) {
		t.Error("a forecast from no sample")
	}
	for range 20 {
		h.Add(8)
	}
	if f := h.Forecast(6); math.Abs(f-8) > 1e-9 {
		t.Errorf("constant 8: forecast %g", f)
	}
	undamped, damped := Holt{Phi: 1}, Holt{}
	for i := range 30 {
		undamped.Add(1 + 0.5*float64(i)) // the last sample is 15.5
		damped.Add(1 + 0.5*float64(i))
	}
	if f := undamped.Forecast(4); math.Abs(f-(15.5+4*0.5)) > 1e-6 {
		t.Errorf("ramp of 0.5 a step, undamped: forecast 4 ahead %g, want 17.5", f)
	}
	if f := damped.Forecast(4); !(f > 15.5 && f < 17.5) {
		t.Errorf("ramp of 0.5 a step, damped: forecast 4 ahead %g, want above the last sample and below the undamped 17.5", f)
	}
	// Far ahead the damped trend adds at most φ/(1−φ) steps of it.
	if f, lim := damped.Forecast(1000), 15.5+0.5*(DefaultPhi/(1-DefaultPhi))+0.5; f > lim {
		t.Errorf("damped forecast 1000 ahead %g, want at most about %g", f, lim)
	}
	h.Reset()
	h.Reset()
	for _, y := range []float64{10, 8, 6, 4, 2, 0, 0} {
		h.Add(y)
	}
	if f := h.Forecast(10); f != 0 {
		t.Errorf("falling load: forecast %g, want 0 (not negative)", f)
	}
	h.Add(math.NaN())
	h.Add(math.Inf(1))
	if f := h.Forecast(0); math.IsNaN(f) || math.IsInf(f, 0) {
		t.Errorf("NaN and Inf samples reached the forecast: %g", f)
	}
}

// TestHoltLeadsAStep: after a rising load's first steps, a fast level
// (alpha 0.5) forecasts a few steps ahead above the current rate, which
// lets the guard throttle before the load arrives; the defaults' slow one
// follows the rise from below, without the overshoot a burst would get
// (the guard plans on the higher of the rate and its forecast).
func TestHoltLeadsAStep(t *testing.T) {
	t.Parallel()
	rise := func(h Holt) float64 {
		for range 10 {
			h.Add(1)
		}
		for _, y := range []float64{2, 3, 4} { // the Azure trace rises like this within minutes
			h.Add(y)
		}
		return h.Forecast(3)
	}
	if f := rise(Holt{Alpha: 0.5, Beta: 0.3, Phi: 0.9}); !(f > 4) {
		t.Errorf("fast level: forecast %g three steps into a rise that reached 4, want above 4", f)
	}
	if f := rise(Holt{}); !(f > 2 && f < 4) {
		t.Errorf("the defaults: forecast %g three steps into a rise from 1 to 4, want between 2 and 4", f)
	}
}
