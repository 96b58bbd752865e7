package admission

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
)

// benchHarness is the realistic scenario: the 200-kernel V100 inference
// profile at 8 req/s with a 120 ms p99 SLO (10 % headroom), one V100
// training step (870 kernels) asking for 10–100 %, MPS with a 5 % step (19
// percentages), 2,000 simulated requests. The job is throttled (to 50 %),
// so the search runs in full: top, bottom, then bisection.
func benchHarness(b *testing.B, workers int) (*harness, Request) {
	b.Helper()
	inf, train := v100Profiles(b)
	// The point estimate: the scenario (a throttle to 50 %) and its figures
	// in docs/predictor.md#speed predate the upper bound, which only reads
	// an interval the same simulation computes anyway.
	model, err := NewModel(testCal(), predictor.DefaultRequests, 1, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	h := newHarnessWith(b, model, predictor.ModeMPS, 120, func(c *Config) {
		c.Services = []ServiceSpec{{Name: "v100-infer", Profile: inf, RateRPS: 8, SLOP99MS: 120}}
		c.PctStep = 5
		c.SearchWorkers = workers
	})
	req := request("bench")
	req.Profile = train
	req.ProfileKey = train.Key() // as the sidecar does: once per distinct profile (hashing its 870 kernel names costs ~0.1 ms)
	return h, req
}

// benchDecide times Decide (then releases the lease, untimed in the
// figures) and reports the p50 and p99 of the decision latency and the
// simulations per decision.
func benchDecide(b *testing.B, workers int, cold bool) {
	h, req := benchHarness(b, workers)
	ctx := context.Background()
	if !cold {
		if _, err := h.c.Quote(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	var durs []time.Duration
	var outcome Outcome
	pct := 0
	misses := h.model.Stats().Misses
	i := 0
	for b.Loop() {
		if cold {
			h.model.Purge()
		}
		req.RequestID = fmt.Sprintf("bench-request-id-%022d", i) // ids are 22 characters at least
		i++
		start := time.Now()
		d, err := h.c.Decide(ctx, req)
		durs = append(durs, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		outcome, pct = d.Outcome, d.Pct
		if d.Lease != nil {
			if err := h.c.Release(ctx, d.Lease.ID, tokenOf(d)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if outcome != Throttle || pct != 50 {
		b.Fatalf("the scenario gave %s at %d %%, want a throttle to 50 %%", outcome, pct)
	}
	slices.Sort(durs)
	q := func(p float64) float64 { return float64(durs[int(p*float64(len(durs)-1))]) / 1e6 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	sims := float64(h.model.Stats().Misses - misses)
	b.ReportMetric(sims/float64(len(durs)), "simulations/decision")
	if cold && workers == 1 { // wall time per simulation; with several workers they overlap
		var total time.Duration
		for _, d := range durs {
			total += d
		}
		b.ReportMetric(total.Seconds()*1000/sims, "ms/simulation")
	}
}

// BenchmarkDecideCold: every prediction simulated (the cache is purged each
// iteration). Goal ≤ 50 ms. workers=1 is the search on one core;
// workers=N evaluates N percentages of the search at once.
func BenchmarkDecideCold(b *testing.B) {
	for _, w := range benchWorkers() {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) { benchDecide(b, w, true) })
	}
}

// BenchmarkDecideWarm: the same decision with every prediction cached.
// Goal ≤ 10 µs.
func BenchmarkDecideWarm(b *testing.B) {
	benchDecide(b, 1, false)
}

// benchWorkers is 1, and the core count when there are several.
func benchWorkers() []int {
	ws := []int{1}
	if n := runtime.GOMAXPROCS(0); n > 1 {
		ws = append(ws, n)
	}
	return ws
}

// settableRate is an Observer whose rate the benchmark sets (0: none).
type settableRate struct{ rps float64 }

func (s *settableRate) ObservedRate(string) (float64, bool) { return s.rps, s.rps > 0 }

// benchGuard times the guard's reaction to a load that rose: the job of
// benchHarness, granted at 50 % at 8 req/s, and a scrape that shows
// 9.5 req/s; Guard re-plans and throttles it. This is what comes after the
// scrape that crosses, besides the wait for the guard's next tick (at most
// its 1 s period). Cold purges the prediction cache before each reaction.
func benchGuard(b *testing.B, cold bool) {
	h, req := benchHarness(b, 1)
	obs := &settableRate{}
	h.c.deps.Observer = obs
	ctx := context.Background()
	var durs []time.Duration
	i := 0
	for b.Loop() {
		obs.rps = 0
		req.RequestID = fmt.Sprintf("bench-request-id-%022d", i)
		i++
		d, err := h.c.Decide(ctx, req)
		if err != nil || d.Lease == nil || d.Pct != 50 {
			b.Fatalf("decide: %v %+v", err, d)
		}
		if _, err := h.c.Guard(ctx); err != nil { // the plan at 8 req/s
			b.Fatal(err)
		}
		if cold {
			h.model.Purge()
		}
		obs.rps = 9.5
		start := time.Now()
		evs, err := h.c.Guard(ctx)
		durs = append(durs, time.Since(start))
		if err != nil || len(evs) != 1 || evs[0].Type != EventThrottle {
			b.Fatalf("guard: %v %+v, want a throttle", err, evs)
		}
		if err := h.c.Release(ctx, d.Lease.ID, tokenOf(d)); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(durs)
	q := func(p float64) float64 { return float64(durs[int(p*float64(len(durs)-1))]) / 1e6 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkGuardReactCold: a rise in load to its throttle event with every
// prediction simulated anew. Goal: within one scrape interval (5 s) and
// 100 ms of the scrape, together with the guard's 1 s tick.
func BenchmarkGuardReactCold(b *testing.B) { benchGuard(b, true) }

// BenchmarkGuardReactWarm: the same reaction with the predictions cached
// (a load seen before).
func BenchmarkGuardReactWarm(b *testing.B) { benchGuard(b, false) }

// BenchmarkJointAllocation is a joint allocation of the reference scenario:
// two live V100 trainers (weights 1, 2) and a third arriving (weight 4),
// each 10–100 % in steps of 10. Cold purges the prediction cache
// before each; warm repeats a known allocation. It reports the
// predictions an allocation makes (the model caches repeats within one).
func BenchmarkJointAllocation(b *testing.B) {
	for _, cold := range []bool{true, false} {
		b.Run(map[bool]string{true: "cold", false: "warm"}[cold], func(b *testing.B) {
			h, req := benchHarness(b, 1)
			ts := make([]Trainer, 3)
			for j := range ts {
				ts[j] = Trainer{Profile: req.Profile, Key: req.ProfileKey}
			}
			grid := pctGrid(10, 100, 10)
			var jobs []jointJob
			for j, w := range []float64{1, 2, 4} {
				g := grid
				if j == 2 {
					g = append([]int{0}, grid...)
				}
				jobs = append(jobs, jointJob{weight: w, grid: g, memoryMiB: 4096})
			}
			ctx := context.Background()
			eval := h.pol().jointEvalOf(ts)
			lim := jointLimits{memoryMiB: 1 << 20, slots: 3}
			if !cold {
				if _, err := allocate(ctx, jobs, lim, eval, 1); err != nil {
					b.Fatal(err)
				}
			}
			var plan jointPlan
			for b.Loop() {
				if cold {
					h.model.Purge()
				}
				var err error
				if plan, err = allocate(ctx, jobs, lim, eval, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/allocation")
			b.ReportMetric(float64(plan.predictions), "predictions/allocation")
			b.Logf("allocation %v, utility %.3f", plan.pcts, plan.utility)
		})
	}
}

// BenchmarkDecideMakesRoom is a joint decision at admit in the reference
// scenario: one V100 trainer (weight 1) runs at 100 %, and the SLO leaves
// no room beside it for a second (weight 3) even at 10 %, but room for
// both once the first is lower. Each iteration quotes the second job (a
// decision without its effects); cold purges the prediction cache first,
// with one worker and with every core predicting the moves. It reports
// the latency and the simulations per decision.
func BenchmarkDecideMakesRoom(b *testing.B) {
	type run struct {
		name    string
		cold    bool
		workers int
	}
	var runs []run
	for _, w := range benchWorkers() {
		runs = append(runs, run{fmt.Sprintf("cold/workers=%d", w), true, w})
	}
	for _, r := range append(runs, run{"warm", false, 1}) {
		cold := r.cold
		b.Run(r.name, func(b *testing.B) {
			h, req := benchHarness(b, r.workers)
			ctx := context.Background()
			ts := []Trainer{{Profile: req.Profile, Key: req.ProfileKey}, {Profile: req.Profile, Key: req.ProfileKey}}
			p99 := func(pcts ...int) float64 {
				for i, p := range pcts {
					ts[i].Pct = p
				}
				preds, _, err := h.pol().predictAll(ctx, ts[:len(pcts)])
				if err != nil {
					b.Fatal(err)
				}
				return preds[0].PredictedP99MS
			}
			alone, both, low := p99(100), p99(100, 10), p99(10, 10)
			limit := alone + 0.3*(both-alone)
			if !(low < limit && limit < both) {
				b.Fatalf("no scenario: alone %.1f, with a second at 10 %% %.1f, both at 10 %% %.1f ms", alone, both, low)
			}
			svc := h.c.cfg.Services[0]
			svc.SLOP99MS = limit / 0.9
			h.c.cfg.Services, h.c.cfg.DecisionTimeout = []ServiceSpec{svc}, 10*time.Minute
			first := req
			first.RequestID, first.JobID, first.TokenHash = "bench-first-request-id-0001", "first", [32]byte{1}
			if d := mustDecide(b, h, first, Grant); d.Pct != 100 {
				b.Fatalf("first at %d %%, want 100", d.Pct)
			}
			req.Weight = 3
			if !cold {
				if _, err := h.c.Quote(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			var durs []time.Duration
			var d Decision
			misses := h.model.Stats().Misses
			for b.Loop() {
				if cold {
					h.model.Purge()
				}
				start := time.Now()
				var err error
				if d, err = h.c.Quote(ctx, req); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(start))
			}
			if d.Code != CodeSharedToFit {
				b.Fatalf("the scenario gave %s (%s), want shared_to_fit", d.Code, d.Message)
			}
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(h.model.Stats().Misses-misses)/float64(len(durs)), "simulations/decision")
			b.Logf("%s", d.Message)
		})
	}
}
