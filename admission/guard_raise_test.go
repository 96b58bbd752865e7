package admission

import (
	"slices"
	"testing"
	"time"
)

// A raise the guard has to take back within raise_after failed: the lease
// is offered only less than that percentage for raise_after, doubled for
// each further failed raise in the last hour, at most an hour. A throttle
// later than that, or not below the raise, is no failure.
func TestFailedRaiseCapsTheNextOffers(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := Config{Settings: DefaultSettings()}
	cfg.PctStep, cfg.Guard.MinMovePct = 10, 10
	cfg.Guard.RaiseAfter = 5 * time.Minute // the doubling, at a raise_after that shows it
	var h holds
	pol := newPolicy(cfg, Deps{}, nil)
	raiseTo := func(to int, at time.Time) { h.raisedTo = nil; h.raised("L", to, at) }
	offers := func(now time.Time) []int {
		e := liveLease{lease: Lease{ID: "L", Pct: 20, MinPct: 10, MaxPct: 100}}
		if below, ok := h.raiseCap("L", now); ok {
			e.raiseBelow = below
		}
		return pol.raiseGrid(&e)
	}
	raiseTo(60, t0)
	h.lowerAfterRaise(cfg.Guard, "L", 10, t0.Add(time.Minute))
	if got := offers(t0.Add(2 * time.Minute)); !slices.Equal(got, []int{20, 30, 40, 50}) {
		t.Errorf("after a failed raise to 60 %%: offers %v, want up to 50 %%", got)
	}
	if got := offers(t0.Add(6*time.Minute + time.Second)); !slices.Equal(got, pctGrid(20, 100, 10)) {
		t.Errorf("raise_after later: offers %v, want every percentage again", got)
	}
	// Two more failures within the hour: twice, then four times as long.
	for i, to := range []int{40, 30} {
		at := t0.Add(time.Duration(10*(i+1)) * time.Minute)
		raiseTo(to, at)
		h.lowerAfterRaise(cfg.Guard, "L", 20, at.Add(time.Minute))
		hold := cfg.Guard.RaiseAfter << (i + 1)
		if rc := h.raiseCaps["L"]; rc.below != to || len(rc.failed) != i+2 || !rc.until.Equal(at.Add(time.Minute+hold)) {
			t.Errorf("failure %d: cap %+v, want below %d for %v", i+2, rc, to, hold)
		}
	}
	if got := offers(t0.Add(32 * time.Minute)); !slices.Equal(got, []int{20}) {
		t.Errorf("after a failed raise to 30 %%: offers %v, want none above 20 %%", got)
	}
	// No failure: a throttle past raise_after, or to the raised percentage.
	for _, tt := range []struct {
		name  string
		after time.Duration
		to    int
	}{{"late", 6 * time.Minute, 10}, {"not below", time.Minute, 60}} {
		h.raiseCaps = nil
		raiseTo(60, t0)
		h.lowerAfterRaise(cfg.Guard, "L", tt.to, t0.Add(tt.after))
		if len(h.raiseCaps) != 0 {
			t.Errorf("%s: caps %+v, want none", tt.name, h.raiseCaps)
		}
	}
}

// With admission.guard.raise_fail_load, a throttle soon after a raise
// counts as a failed raise only while the load the guard plans on has not
// risen past that share since the raise: a burst that lowers the lease is
// no verdict on the percentage.
func TestFailedRaiseExcusesALoadRise(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g := DefaultSettings().Guard
	for _, tc := range []struct {
		name       string
		failLoad   float64
		before     float64
		after      float64
		wantFailed bool
	}{
		{name: "off: every throttle counts", failLoad: 0, before: 10, after: 20, wantFailed: true},
		{name: "the load rose past it", failLoad: 0.1, before: 10, after: 11.5, wantFailed: false},
		{name: "the load rose less", failLoad: 0.1, before: 10, after: 10.5, wantFailed: true},
		{name: "the load fell", failLoad: 0.1, before: 10, after: 8, wantFailed: true},
	} {
		g.RaiseFailLoad = tc.failLoad
		h := holds{load: tc.before}
		h.raised("L", 60, t0)
		h.load = tc.after
		h.lowerAfterRaise(g, "L", 20, t0.Add(30*time.Second))
		if _, failed := h.raiseCap("L", t0.Add(31*time.Second)); failed != tc.wantFailed {
			t.Errorf("%s: failed raise %v, want %v", tc.name, failed, tc.wantFailed)
		}
	}
}

// admission.guard.raise_step_pct sets the step of what a raise may reach,
// apart from pct_step: a lease at 20 % on a 10 % grid may rise to 35 %.
func TestRaiseGridStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		step, min int
		want      []int
	}{
		{name: "pct_step", step: 0, min: 10, want: []int{20, 30, 40, 50}},
		{name: "finer", step: 5, min: 5, want: []int{20, 25, 30, 35, 40, 45, 50}},
		{name: "finer, with min_move_pct", step: 5, min: 10, want: []int{20, 30, 35, 40, 45, 50}},
	} {
		cfg := Config{Settings: DefaultSettings()}
		cfg.PctStep, cfg.Guard.RaiseStepPct, cfg.Guard.MinMovePct = 10, tc.step, tc.min
		pol := newPolicy(cfg, Deps{}, nil)
		e := liveLease{lease: Lease{ID: "L", Pct: 20, MinPct: 10, MaxPct: 50}}
		if got := pol.raiseGrid(&e); !slices.Equal(got, tc.want) {
			t.Errorf("%s: raise grid %v, want %v", tc.name, got, tc.want)
		}
	}
}
