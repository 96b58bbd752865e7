package observe

import (
	"math"
	"testing"
)

// TestHoltFollowsTrends: a constant is forecast as itself, a steady ramp
// ahead of its last sample by the ramp's slope, and a fall never below zero.
func TestHoltFollowsTrends(t *testing.T) {
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
	h.Reset()
	for i := range 30 {
		h.Add(1 + 0.5*float64(i)) // the last sample is 15.5
	}
	if f := h.Forecast(4); math.Abs(f-(15.5+4*0.5)) > 1e-6 {
		t.Errorf("ramp of 0.5 a step: forecast 4 ahead %g, want 17.5", f)
	}
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

// TestHoltLeadsAStep: after a rising load's first steps, the forecast a few
// steps ahead is above the current rate, which is what lets the guard
// throttle before the load arrives.
func TestHoltLeadsAStep(t *testing.T) {
	var h Holt
	for range 10 {
		h.Add(1)
	}
	for _, y := range []float64{2, 3, 4} { // the Azure trace rises like this within minutes
		h.Add(y)
	}
	if f := h.Forecast(3); !(f > 4) {
		t.Errorf("forecast %g three steps into a rise that reached 4, want above 4", f)
	}
}
