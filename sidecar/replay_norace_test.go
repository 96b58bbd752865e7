//go:build !race

// Thousands of simulations, ten times slower under the race detector, which
// the other guard tests already run the guard under: make test runs this
// file in its plain pass.

package sidecar

import (
	"testing"
	"testing/synctest"
)

// TestGuardReplay replays a slice of the Azure trace (minutes 18 to 33,
// where the load rises from 5.7 to 8.4 requests a second; -replay.minutes
// 0 -replay.start 0 for the whole hour, `make replay`) under each policy,
// and checks what the guard is for: with it, fewer minutes over the SLO
// than with static admission, and work still done.
func TestGuardReplay(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t)
	results := map[string]replayResult{}
	for _, policy := range []string{"static", "reactive", "forecast"} {
		synctest.Test(t, func(t *testing.T) { results[policy] = w.replay(t, policy) })
		r := results[policy]
		t.Logf("%-8s minutes over SLO %3d of %3d, training work %7.0f pct·s (%.2f GPU-hours at 100 %%), events %v",
			policy, r.overSLO, r.minutes, r.pctSeconds, r.pctSeconds/100/3600, r.events)
	}
	st, re, fc := results["static"], results["reactive"], results["forecast"]
	if !(re.overSLO < st.overSLO && fc.overSLO < st.overSLO) {
		t.Errorf("minutes over SLO: static %d, reactive %d, forecast %d; want both guards below static", st.overSLO, re.overSLO, fc.overSLO)
	}
	if re.pctSeconds == 0 || fc.pctSeconds == 0 {
		t.Errorf("training work: reactive %g, forecast %g; want work done under the guard", re.pctSeconds, fc.pctSeconds)
	}
}
