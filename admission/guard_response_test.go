package admission

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// What a prediction is multiplied by once the guard has learned the
// server's response: the ratio measured at the percentage; a step above
// the highest measured, its ratio (exploration); further, no fit; below,
// the nearest measured; a stale measurement gives way to a newer one a
// step below; nothing for a trainer never measured.
func TestLearnedRatio(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a, b := Trainer{Key: predictor.ProfileKey{1}}, Trainer{Key: predictor.ProfileKey{2}}
	l := learned{}
	win := func(end time.Time) ObservedWindow { return ObservedWindow{Since: end.Add(-30 * time.Second), End: end} }
	l.observe("bert", a, 20, 2.0, win(t0), 1)
	l.observe("bert", a, 20, 2.5, win(t0.Add(time.Second)), 1) // overlaps the last: not learned
	l.observe("bert", a, 40, 3.0, win(t0.Add(time.Minute)), 1)
	l.observe("bert", a, 40, 2.2, win(t0.Add(2*time.Minute)), 1)
	stale := t0.Add(-time.Hour)
	for _, tc := range []struct {
		name    string
		trainer Trainer
		pct     int
		want    float64
		ok      bool
	}{
		{"measured", a, 20, 2.0, true},
		{"measured: the largest of its windows", a, 40, 3.0, true},
		{"between two measured: the larger", a, 30, 3.0, true},
		{"below anything measured: the nearest", a, 10, 2.0, true},
		{"a step above the highest: explore", a, 50, 3.0, true},
		{"two steps above: not yet", a, 60, math.Inf(1), true},
		{"another trainer: the prior", b, 20, 0, false},
	} {
		got, ok := l.ratio("bert", tc.trainer.Key, tc.pct, 10, stale)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ratio %g, %v; want %g, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := l.ratio("gpt", a.Key, 20, 10, stale); ok {
		t.Errorf("another service: ratio %g, want none", got)
	}
	// 40 % measured before 30 % was: once stale, 30 %'s ratio stands for it.
	l.observe("bert", a, 30, 1.5, win(t0.Add(20*time.Minute)), 1)
	if got, _ := l.ratio("bert", a.Key, 40, 10, t0.Add(10*time.Minute)); got != 1.5 {
		t.Errorf("stale 40 %% with 30 %% measured since: ratio %g, want 1.5", got)
	}
	if got, _ := l.ratio("bert", a.Key, 40, 10, stale); got != 3.0 {
		t.Errorf("40 %% not yet stale: ratio %g, want its own 3", got)
	}
	for range responseWindows + 2 {
		t0 = t0.Add(time.Minute)
		l.observe("bert", a, 20, 1.1, win(t0.Add(30*time.Minute)), 1)
	}
	if got, _ := l.ratio("bert", a.Key, 20, 10, stale); got != 1.1 {
		t.Errorf("after %d newer windows: ratio %g, want the old 2 forgotten", responseWindows, got)
	}
	pts := l.points()
	if len(pts) != 3 || pts[0].Pct != 20 || pts[0].Windows != responseWindows+3 || len(pts[0].Ratios) != responseWindows {
		t.Errorf("points %+v", pts)
	}
}

// With admission.guard.learn_response, a job measured next to the service
// is raised a step at a time, explore_after apart, and a new job of the
// same trainer starts a step above what was measured, not at its min_pct.
func TestLearnedResponseRaisesAStepAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	one := resnetP99(t, 100)
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, predictor.ModeMPS, one/0.9*3, func(c *Config) { c.Guard.LearnResponse = true })
		obs := &fakeLatency{}
		h.c.deps.Observer = obs
		first := mustDecide(t, h, request("first"), Throttle) // measure first
		if err := h.c.Register(ctx, first.Lease.ID, tokenOf(first), []int{100}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(time.Minute)
		obs.set(resnetP99(t, float64(first.Pct)), start) // as predicted
		for range 3 * 60 {
			if _, err := h.c.Guard(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		step := max(h.c.cfg.PctStep, h.c.cfg.Guard.MinMovePct)
		var raises []int
		for _, ev := range h.events.all() {
			if ev.Type == EventRaise && ev.LeaseID == first.Lease.ID {
				raises = append(raises, ev.Pct)
			}
		}
		if len(raises) == 0 || raises[0] != first.Pct+step {
			t.Errorf("raises %v: want the job raised a step of %d %% above its %d %% within explore_after", raises, step, first.Pct)
		}
		if pts := h.c.Response(); len(pts) != 1 || pts[0].Pct != first.Pct || pts[0].Service != "bert" {
			t.Errorf("learned %+v: want one point, bert at %d %%", pts, first.Pct)
		}
		if err := h.c.Release(ctx, first.Lease.ID, tokenOf(first)); err != nil {
			t.Fatal(err)
		}
		d := mustDecide(t, h, request("second"), Throttle)
		if d.Pct != first.Pct+step || !strings.Contains(d.Message, "a step at a time") {
			t.Errorf("a second job of the trainer: %s at %d %% (%s), want %d %%", d.Code, d.Pct, d.Message, first.Pct+step)
		}
	})
}

// What one run learned, restored into the next, places a new job of the
// trainer where the measurement says it fits, as in the run that learned
// it; points of services gone are dropped.
func TestRestoredResponseSurvivesARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	one := resnetP99(t, 100)
	synctest.Test(t, func(t *testing.T) {
		learn := func(c *Config) { c.Guard.LearnResponse = true }
		h := newHarness(t, predictor.ModeMPS, one/0.9*3, learn)
		obs := &fakeLatency{}
		h.c.deps.Observer = obs
		first := mustDecide(t, h, request("first"), Throttle)
		if err := h.c.Register(ctx, first.Lease.ID, tokenOf(first), []int{100}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(time.Minute)
		obs.set(resnetP99(t, float64(first.Pct)), start)
		if _, err := h.c.Guard(ctx); err != nil {
			t.Fatal(err)
		}
		saved := h.c.Response()
		if len(saved) != 1 {
			t.Fatalf("learned %+v, want one point", saved)
		}
		gone := saved[0]
		gone.Service = "removed"

		again := newHarness(t, predictor.ModeMPS, one/0.9*3, learn)
		again.c.deps.Observer = &fakeLatency{}
		before := mustDecide(t, again, request("before"), Throttle)
		if before.Pct != first.Pct {
			t.Fatalf("before the restore: %d %%, want measure-first's %d %%", before.Pct, first.Pct)
		}
		if err := again.c.Release(ctx, before.Lease.ID, tokenOf(before)); err != nil {
			t.Fatal(err)
		}
		n, err := again.c.RestoreResponse(append(saved, gone))
		if err != nil || n != 1 {
			t.Fatalf("RestoreResponse = %d, %v; want 1 point taken, the removed service's dropped", n, err)
		}
		step := max(again.c.cfg.PctStep, again.c.cfg.Guard.MinMovePct)
		if d := mustDecide(t, again, request("after"), Throttle); d.Pct != first.Pct+step {
			t.Errorf("after the restore: %s at %d %% (%s), want a step above the measured %d %%", d.Code, d.Pct, d.Message, first.Pct)
		}
		if got := again.c.Response(); len(got) != 1 || got[0].Windows != saved[0].Windows || got[0].Ratio != saved[0].Ratio {
			t.Errorf("restored %+v, want %+v", got, saved)
		}
	})
}

func TestRestoreResponseNamesTheBadField(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	good := ResponsePoint{Service: "bert", Trainer: strings.Repeat("ab", 32), Pct: 20, Ratios: []float64{1.2}, Windows: 1}
	for _, tc := range []struct {
		name  string
		edit  func(p *ResponsePoint)
		field string
	}{
		{"trainer", func(p *ResponsePoint) { p.Trainer = "xyz" }, "points[1].trainer"},
		{"pct", func(p *ResponsePoint) { p.Pct = 0 }, "points[1].pct"},
		{"no ratios", func(p *ResponsePoint) { p.Ratios = nil }, "points[1].ratios"},
		{"ratio", func(p *ResponsePoint) { p.Ratios = []float64{math.NaN()} }, "points[1].ratios[0]"},
		{"windows", func(p *ResponsePoint) { p.Windows = 0 }, "points[1].windows"},
	} {
		bad := good
		bad.Ratios = slices.Clone(good.Ratios)
		tc.edit(&bad)
		n, err := h.c.RestoreResponse([]ResponsePoint{good, bad})
		if n != 0 || err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: RestoreResponse = %d, %v; want nothing taken and an error naming %s", tc.name, n, err, tc.field)
		}
	}
	if pts := h.c.Response(); len(pts) != 0 {
		t.Errorf("after bad restores the controller learned %+v, want nothing", pts)
	}
}

// What is learned is bounded: past MaxResponsePoints the point learned
// longest ago gives way, whatever number of profiles a launcher sends.
func TestLearnedResponseIsBounded(t *testing.T) {
	t.Parallel()
	l := learned{}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range MaxResponsePoints + 10 {
		var tr Trainer
		tr.Key[0], tr.Key[1] = byte(i), byte(i>>8)
		end := t0.Add(time.Duration(i) * time.Minute)
		l.observe("bert", tr, 20, 1.1, ObservedWindow{Since: end.Add(-time.Minute), End: end}, 1)
	}
	pts := l.points()
	if len(pts) != MaxResponsePoints {
		t.Fatalf("%d points learned, want at most %d", len(pts), MaxResponsePoints)
	}
	for _, p := range pts {
		if p.Last.Before(t0.Add(10 * time.Minute)) {
			t.Errorf("point %s learned at %s kept, want the 10 oldest dropped", p.Trainer, p.Last)
		}
	}
}

// admission.guard.response_quantile: a learned percentage's ratio is that
// quantile of its last windows by nearest rank (1, the default before:
// their largest), so that one window taken at a burst can stand aside.
func TestLearnedRatioQuantile(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := Trainer{Key: predictor.ProfileKey{1}}
	for _, tc := range []struct {
		q    float64
		want float64
	}{{1, 9}, {0, 9}, {0.8, 6}, {0.5, 5}, {0.1, 4}} {
		l := learned{}
		for i, r := range []float64{5, 9, 4, 6, 5, 5} {
			end := t0.Add(time.Duration(i) * time.Minute)
			l.observe("bert", a, 30, r, ObservedWindow{Since: end.Add(-30 * time.Second), End: end}, tc.q)
		}
		if got, _ := l.ratio("bert", a.Key, 30, 10, t0.Add(-time.Hour)); got != tc.want {
			t.Errorf("quantile %g: ratio %g, want %g", tc.q, got, tc.want)
		}
	}
}
