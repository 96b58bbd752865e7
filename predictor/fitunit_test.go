package predictor

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/colocd/colocd/field"
)

// FitUnit shrinks (or stretches) the host gaps by one factor so that the
// unit lasts the length timed without the profiler; the kernels keep
// theirs, and a length that the kernels alone exceed is refused by field.
func TestFitUnit(t *testing.T) {
	t.Parallel()
	p := uniformProfile("p", KindTraining, 10, 300, 100) // busy 3 ms, gaps 1 ms: a 4 ms unit
	k, err := p.FitUnit(3.5)
	if err != nil {
		t.Fatal(err)
	}
	if k != 0.5 {
		t.Errorf("factor %v, want 0.5", k)
	}
	var unit float64
	for _, op := range p.Ops {
		if op.DurUS != 300 {
			t.Fatalf("a kernel changed length: %v µs", op.DurUS)
		}
		unit += op.DurUS + op.GapUS
	}
	if math.Abs(unit-3500) > 1e-9 {
		t.Errorf("unit %v µs, want 3500", unit)
	}
	for _, c := range []struct {
		p    *Profile
		ms   float64
		want string
	}{
		{uniformProfile("p", KindTraining, 10, 300, 100), 2.9, "at least the kernels' busy time, 3.000 ms"},
		{uniformProfile("p", KindTraining, 10, 300, 0), 3.5, "no host gaps to scale"},
		{&Profile{Name: "s", Summary: &Summary{}}, 3.5, "a profile with ops"},
		{uniformProfile("p", KindTraining, 10, 300, 100), math.Inf(1), "at least the kernels' busy time"},
	} {
		_, err := c.p.FitUnit(c.ms)
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Path != "unit_ms" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FitUnit(%v): %v, want a unit_ms error saying %q", c.ms, err, c.want)
		}
	}
	// No gaps and the unit already that long: nothing to do.
	if k, err := uniformProfile("p", KindTraining, 10, 300, 0).FitUnit(3); err != nil || k != 1 {
		t.Errorf("FitUnit(3) of a gapless 3 ms unit: %v, %v; want 1, nil", k, err)
	}
}
