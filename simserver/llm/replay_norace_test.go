//go:build !race

package llm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
)

// quantile is the q-quantile of sorted xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

// TestReplayAzureWithTrainers replays the hour of Azure's conversation
// trace on the default engine, alone and next to one trainer at 25, 50
// and 100 %, and logs the latencies (go test -run ReplayAzure -v): the
// law's figures, not measurements of a GPU. The tail grows with the
// percentage. Under the race detector it would take too long.
func TestReplayAzureWithTrainers(t *testing.T) {
	t.Parallel()
	reqs := azureRequests(t)
	// A trainer whose kernels keep the GPU 90 % busy, 200 µs each, asking
	// for 30 % of the bandwidth.
	base := Trainer{Duty: 0.9, BandwidthFrac: 0.3, KernelMS: 0.2}
	var b strings.Builder
	fmt.Fprintf(&b, "Azure conv trace, %d requests; trainer duty %.2f, bandwidth %.2f, kernels %.2f ms\n", len(reqs), base.Duty, base.BandwidthFrac, base.KernelMS)
	fmt.Fprintf(&b, "%-8s %9s %9s %9s %9s %9s %9s %8s %7s\n", "trainer", "e2e p50", "e2e p99", "ttft p50", "ttft p99", "itl p50", "itl p99", "steps", "preempt")
	prevP99 := 0.0
	for _, pct := range []int{0, 25, 50, 100} {
		cfg := Default()
		cfg.Requests = reqs
		cfg.Start = time.Unix(0, 0)
		cfg.Seed = 1
		tr := base
		tr.Pct = pct
		cfg.Trainers = func() []Trainer { return []Trainer{tr} }
		var e2e, ttft, itl []float64
		cfg.OnFinish = func(f Finished) { e2e = append(e2e, f.E2E.Seconds()) }
		cfg.OnToken = func(_ time.Time, first bool, d time.Duration) {
			if first {
				ttft = append(ttft, d.Seconds())
			} else {
				itl = append(itl, d.Seconds()*1000)
			}
		}
		e := newEngine(t, cfg)
		advanceBy(t, e, 24*time.Hour)
		if !e.Done() {
			t.Fatalf("at %d %%: not done: %+v", pct, e.Stats())
		}
		for _, xs := range [][]float64{e2e, ttft, itl} {
			slices.Sort(xs)
		}
		s := e.Stats()
		name := "none"
		if pct > 0 {
			name = fmt.Sprintf("%d %%", pct)
		}
		fmt.Fprintf(&b, "%-8s %8.2fs %8.2fs %8.3fs %8.3fs %7.1fms %7.1fms %8d %7d\n", name, quantile(e2e, 0.5), quantile(e2e, 0.99),
			quantile(ttft, 0.5), quantile(ttft, 0.99), quantile(itl, 0.5), quantile(itl, 0.99), s.Steps, s.Preemptions)
		if p99 := quantile(e2e, 0.99); p99 <= prevP99 {
			t.Errorf("at %d %%: e2e p99 %.2f s, want more than %.2f s", pct, p99, prevP99)
		} else {
			prevP99 = p99
		}
	}
	p, err := predictor.LoadProfile("../../testdata/profiles/v100-train-step.json")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "for scale, testdata/profiles/v100-train-step.json at 50 %%: %+v\n", TrainerFromProfile(p, 50))
	t.Log("\n" + b.String())
}
