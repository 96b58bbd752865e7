package replay

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBestSchedule(t *testing.T) {
	t.Parallel()
	grid := []int{0, 10, 20, 30} // ascending, 0 first
	for _, tc := range []struct {
		name    string
		caps    []int
		budget  int
		restart time.Duration
		want    []int
	}{
		{name: "every minute at its cap when changes are free", caps: []int{3, 1, 3, 2}, budget: 3, want: []int{3, 1, 3, 2}},
		{name: "no change allowed: the lowest cap all through", caps: []int{3, 1, 3, 2}, budget: 0, want: []int{1, 1, 1, 1}},
		{name: "one change: the best split", caps: []int{3, 3, 3, 1, 1, 1}, budget: 1, want: []int{3, 3, 3, 1, 1, 1}},
		{name: "a minute at 0 where the server is over alone", caps: []int{2, 0, 2}, budget: 2, want: []int{2, 0, 2}},
		// One minute 10 % higher is worth 600 pct·s; the restart back at 20 %
		// costs 20 % × 40 s = 800 of it.
		{name: "a rise not worth its restart", caps: []int{2, 3, 2}, budget: 2, restart: 40 * time.Second, want: []int{2, 2, 2}},
		{name: "a rise worth its restart", caps: []int{2, 3, 3, 3, 2}, budget: 2, restart: 10 * time.Second, want: []int{2, 3, 3, 3, 2}},
	} {
		got := bestSchedule(grid, tc.caps, tc.budget, tc.restart)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		for m, j := range got {
			if j > tc.caps[m] {
				t.Errorf("%s: minute %d at grid %d over its cap %d", tc.name, m, j, tc.caps[m])
			}
		}
	}
}

// The oracle keeps every minute the server alone keeps, does at least
// what the best constant percentage does, and is what every policy's
// work is measured against.
func TestOracleKeepsTheSLOAndBoundsTheOthers(t *testing.T) {
	t.Parallel()
	cfg := coarse(t, 4, Forecast, BestStatic, Oracle)
	by := map[Policy]Result{}
	for _, r := range mustRun(t, cfg) {
		by[r.Policy] = r
	}
	o, b, f := by[Oracle], by[BestStatic], by[Forecast]
	if o.MinutesOver != o.MinutesOverAlone || o.Minutes != 4 {
		t.Fatalf("oracle: %d of %d minutes over, %d of them over alone; want only those", o.MinutesOver, o.Minutes, o.MinutesOverAlone)
	}
	if o.WorkVsOracle != 1 || !(o.WorkPctSeconds >= b.WorkPctSeconds) || !(o.WorkPctSeconds > 0) {
		t.Errorf("oracle work %g pct·s (%.2f of itself), best-static %g: want at least best-static's", o.WorkPctSeconds, o.WorkVsOracle, b.WorkPctSeconds)
	}
	if want := f.WorkPctSeconds / o.WorkPctSeconds; f.WorkVsOracle != want {
		t.Errorf("forecast work vs oracle %g, want %g", f.WorkVsOracle, want)
	}
	if len(o.Series) == 0 || o.ChangesPerHour != float64(o.Changes)/cfg.Trace[len(cfg.Trace)-1].Arrival.Hours() {
		t.Errorf("oracle series %d samples, %d changes, %g an hour", len(o.Series), o.Changes, o.ChangesPerHour)
	}
}

// The oracle at the guard's limit keeps every judged minute within the
// SLO less the headroom, does no more than the oracle held to the SLO
// (its caps are lower), and is what work_vs_oracle_limit is measured
// against; a replay without it reports no such share.
func TestOracleLimitKeepsTheGuardsLimit(t *testing.T) {
	t.Parallel()
	cfg := coarse(t, 4, Forecast, Oracle, OracleLimit)
	cfg.Settings.Headroom = 0.3
	by := map[Policy]Result{}
	for _, r := range mustRun(t, cfg) {
		by[r.Policy] = r
	}
	o, ol, f := by[Oracle], by[OracleLimit], by[Forecast]
	limit := 0.7 * cfg.Service.SLOP99MS
	if ol.Minutes != 4 || ol.WorstP99MS > limit {
		t.Fatalf("oracle-limit: %d minutes judged, worst p99 %.1f ms; want 4, all within %.1f", ol.Minutes, ol.WorstP99MS, limit)
	}
	if !(ol.WorkPctSeconds > 0) || ol.WorkPctSeconds >= o.WorkPctSeconds || o.WorstP99MS <= limit {
		t.Errorf("oracle-limit work %g pct·s, oracle %g (worst p99 %.1f ms): want less than the oracle's, which used the room above %.1f", ol.WorkPctSeconds, o.WorkPctSeconds, o.WorstP99MS, limit)
	}
	if ol.WorkVsOracleLimit != 1 || f.WorkVsOracleLimit != f.WorkPctSeconds/ol.WorkPctSeconds || o.WorkVsOracleLimit != o.WorkPctSeconds/ol.WorkPctSeconds {
		t.Errorf("work vs oracle-limit: itself %g, forecast %g, oracle %g", ol.WorkVsOracleLimit, f.WorkVsOracleLimit, o.WorkVsOracleLimit)
	}
	cfg.Policies = []Policy{Oracle}
	if got := mustRun(t, cfg)[0].WorkVsOracleLimit; got != 0 {
		t.Errorf("without oracle-limit replayed, work_vs_oracle_limit %g, want 0 (omitted)", got)
	}
}

// The table has a column of the work over oracle-limit's when, and only
// when, oracle-limit was replayed, and --json carries it the same way.
func TestTableAndJSONShowOracleLimitWhenReplayed(t *testing.T) {
	t.Parallel()
	with := []Result{{Policy: Learned, WorkVsOracle: 0.5, WorkVsOracleLimit: 0.625}, {Policy: Oracle, WorkVsOracle: 1, WorkVsOracleLimit: 1.25}, {Policy: OracleLimit, WorkVsOracle: 0.8, WorkVsOracleLimit: 1}}
	var b strings.Builder
	if err := WriteTable(&b, with); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "work vs oracle-limit") || !strings.Contains(lines[1], "0.50  ") || !strings.Contains(lines[1], "0.62") {
		t.Errorf("table with oracle-limit:\n%s", b.String())
	}
	b.Reset()
	if err := WriteTable(&b, with[:2]); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "oracle-limit") {
		t.Errorf("table without oracle-limit has its column:\n%s", b.String())
	}
	for _, tc := range []struct {
		r    Result
		want bool
	}{{with[0], true}, {Result{Policy: Learned, WorkVsOracle: 0.5}, false}} {
		data, err := json.Marshal(tc.r)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(data), `"work_vs_oracle_limit"`); got != tc.want {
			t.Errorf("JSON %s: work_vs_oracle_limit there %v, want %v", data, got, tc.want)
		}
	}
}
