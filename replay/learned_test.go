package replay

import "testing"

// The learned policy is the forecast guard deciding on the response it
// measured: it keeps the minutes the server alone keeps, and raises the
// job a step of the grid at a time.
func TestLearnedRaisesAStepAtATime(t *testing.T) {
	t.Parallel()
	cfg := coarse(t, 12, Forecast, Learned)
	by := map[Policy]Result{}
	for _, r := range mustRun(t, cfg) {
		by[r.Policy] = r
	}
	l, f := by[Learned], by[Forecast]
	// The largest rise of the running percentage between two runs of the
	// job (a restart runs nothing between them).
	jumps := func(r Result) (most int) {
		last := 0
		for _, s := range r.Series {
			if s.Pct == 0 {
				continue
			}
			if last > 0 {
				most = max(most, s.Pct-last)
			}
			last = s.Pct
		}
		return most
	}
	t.Logf("learned: %d over, work %.0f, raises %d, largest raise %d; forecast: %d over, work %.0f, raises %d, largest %d",
		l.MinutesOver, l.WorkPctSeconds, l.Raises, jumps(l), f.MinutesOver, f.WorkPctSeconds, f.Raises, jumps(f))
	if l.MinutesOver != l.MinutesOverAlone {
		t.Errorf("learned: %d minutes over, %d of them over alone; want only those", l.MinutesOver, l.MinutesOverAlone)
	}
	if l.Raises == 0 || jumps(l) > 10 {
		t.Errorf("learned: %d raises, the largest %d %%: want raises of one 10 %% step", l.Raises, jumps(l))
	}
}
