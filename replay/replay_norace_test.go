//go:build !race

// Thousands of simulations, ten times slower under the race detector (the
// short replay in replay_test.go runs the same loop under it): make test
// runs this file in its plain pass.

package replay

import (
	"testing"
	"time"
)

// TestGuardKeepsTheSLO replays a slice of the Azure conversation trace
// (minutes 18 to 33, where the load rises from 5.7 to 8.4 requests a
// second) under each policy, on both servers, and checks what the guard
// is for: with it, fewer minutes over the SLO than with static admission,
// and work still done.
func TestGuardKeepsTheSLO(t *testing.T) {
	t.Parallel()
	for _, server := range []string{"predicted", "engine"} {
		cfg := conversation(t, 18, 15)
		if server == "engine" {
			eng, err := Default(cfg.Trace)
			if err != nil {
				t.Fatal(err)
			}
			cfg = eng
		}
		results := mustRun(t, cfg)
		by := map[Policy]Result{}
		for _, r := range results {
			by[r.Policy] = r
			t.Logf("%-9s %-8s over the SLO %2d of %2d minutes, work %.2f of static (%.0f pct·s), throttles %d raises %d revokes %d evictions %d, worst p99 %.1f ms",
				server, r.Policy, r.MinutesOver, r.Minutes, r.WorkVsStatic, r.WorkPctSeconds, r.Throttles, r.Raises, r.Revokes, r.Evictions, r.WorstP99MS)
		}
		st, re, fc := by[Static], by[Reactive], by[Forecast]
		if !(re.MinutesOver < st.MinutesOver && fc.MinutesOver < st.MinutesOver) {
			t.Errorf("%s: minutes over the SLO: static %d, reactive %d, forecast %d; want both guards below static", server, st.MinutesOver, re.MinutesOver, fc.MinutesOver)
		}
		if !(re.WorkVsStatic > 0 && fc.WorkVsStatic > 0) || st.WorkVsStatic != 1 {
			t.Errorf("%s: work vs static: static %g, reactive %g, forecast %g; want 1 and work done under the guards", server, st.WorkVsStatic, re.WorkVsStatic, fc.WorkVsStatic)
		}
	}
}

// On the engine, whose slowdown next to the trainer the model
// underestimates five to eight times, a job granted in full on the
// prediction holds the server over the guard's limit until the first
// measurement throttles it; measured first (admission.guard.
// grant_before_measured: false, the default) it starts at its min_pct and
// every minute stays within the limit. The first six minutes of the
// conversation trace, forecast policy, errors 1 and 1.3, with raise_after
// past them: the first grant alone (a raise after a minute of margin may
// run a window over the limit, within the SLO, before it is throttled).
func TestMeasureFirstKeepsTheFirstMinutesWithinTheLimit(t *testing.T) {
	t.Parallel()
	for _, e := range []float64{1, 1.3} {
		worst := map[bool]float64{}
		for _, before := range []bool{false, true} {
			cfg, err := Default(conversationMinutes(t, 0, 6))
			if err != nil {
				t.Fatal(err)
			}
			cfg.ErrorFactor, cfg.Policies = e, []Policy{Forecast}
			cfg.Settings.Guard.GrantBeforeMeasured = before
			cfg.Settings.Guard.RaiseAfter = 10 * time.Minute
			r := mustRun(t, cfg)[0]
			worst[before] = r.WorstP99MS
			t.Logf("error %.1f, grant before measured %v: worst minute p99 %.1f ms, %d of %d over the SLO, work %.2f", e, before, r.WorstP99MS, r.MinutesOver, r.Minutes, r.WorkVsStatic)
		}
		limit := DefaultStepSLOMS * 0.9 // the default replay's 10 % headroom
		if !(worst[false] <= limit && worst[true] > limit) {
			t.Errorf("error %.1f: worst minute %.1f ms measured first, %.1f ms granted in full; want the first within the limit %.1f ms and the second over it", e, worst[false], worst[true], limit)
		}
	}
}
