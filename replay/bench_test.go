package replay

import (
	"context"
	"testing"
)

// BenchmarkReplayOracleHour replays the whole hour of the Azure
// conversation trace on the default engine at error 1.3 under every
// default policy, the oracle included, and reports the seconds a
// trace-hour takes (the goal: under 30) and each policy's work as a share
// of the oracle's.
func BenchmarkReplayOracleHour(b *testing.B) {
	cfg, err := Default(conversationMinutes(b, 0, 0))
	if err != nil {
		b.Fatal(err)
	}
	cfg.ErrorFactor = 1.3
	hours := cfg.Trace[len(cfg.Trace)-1].Arrival.Hours()
	var results []Result
	for b.Loop() {
		if results, err = Run(context.Background(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/hours, "s/trace-hour")
	for _, r := range results {
		b.ReportMetric(r.WorkVsOracle, string(r.Policy)+"-work-vs-oracle")
		b.ReportMetric(float64(r.MinutesOver-r.MinutesOverAlone), string(r.Policy)+"-minutes-over")
	}
}
