package llm

import (
	"testing"
	"time"
)

// BenchmarkReplayHour replays the hour of Azure's conversation trace
// (19,366 requests) on the default engine with no trainer, and reports
// the seconds one trace-hour takes to simulate and the steps a second.
func BenchmarkReplayHour(b *testing.B) {
	reqs := azureRequests(b)
	hours := reqs[len(reqs)-1].Arrival.Hours()
	cfg := Default()
	cfg.Requests = reqs
	cfg.Start = time.Unix(0, 0)
	steps := 0
	b.ResetTimer()
	for b.Loop() {
		e := newEngine(b, cfg)
		advanceBy(b, e, 24*time.Hour)
		steps += e.Stats().Steps
	}
	secs := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(secs/hours, "s/trace-hour")
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}
