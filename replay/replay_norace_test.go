//go:build !race

// Thousands of simulations, ten times slower under the race detector (the
// short replay in replay_test.go runs the same loop under it): make test
// runs this file in its plain pass.

package replay

import (
	"testing"
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
