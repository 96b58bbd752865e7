//go:build slow && !race

// Tens of thousands of predictions on one goroutine, which gain nothing from
// the race detector: make test runs this file in its plain pass.
// It also carries the slow tag: a plain go test ./... leaves it to make test
// (go test -tags slow runs it).

package admission

import (
	"context"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// The allocation is within 2 % of the best of every combination, and fits
// by the real prediction, for 2 and 3 jobs on a grid of 19 percentages and
// 4 jobs on a grid of 10, with different weights and speed-up curves, a
// new job that may be left out and a memory limit that binds.
func TestJointAllocationAgainstExhaustiveSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	profiles := jointProfiles()
	tests := []struct {
		name    string
		jobs    []int     // profiles
		weights []float64 // of each job
		step    int
		newJob  bool // the last job may be left out
		memory  int  // MiB available to the jobs
	}{
		{"2 jobs, equal weights", []int{0, 1}, []float64{1, 1}, 5, false, 1 << 20},
		{"2 jobs, the narrow one worth 3", []int{0, 1}, []float64{1, 3}, 5, false, 1 << 20},
		{"3 jobs, a new one that may be left out", []int{0, 1, 2}, []float64{1, 2, 0.5}, 5, true, 1 << 20},
		{"3 jobs, memory for two", []int{0, 2, 1}, []float64{1, 1, 4}, 5, true, 2*2048 + 100},
		{"4 jobs", []int{0, 1, 2, 0}, []float64{1, 2, 1, 3}, 10, true, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []*predictor.Profile
			for _, i := range tt.jobs {
				ps = append(ps, profiles[i])
			}
			h, ts := jointSetup(t, ps, tt.step)
			eval := h.pol().jointEvalOf(ts)
			var jobs []jointJob
			for j := range ps {
				grid := pctGrid(tt.step, 100, tt.step)
				if tt.newJob && j == len(ps)-1 {
					grid = append([]int{0}, grid...)
				}
				jobs = append(jobs, jointJob{weight: tt.weights[j], grid: grid, memoryMiB: 2048})
			}
			lim := jointLimits{memoryMiB: tt.memory, slots: 4}
			plan, err := allocate(ctx, jobs, lim, eval, 1)
			if err != nil {
				t.Fatal(err)
			}
			best, bestU, feasible := exhaustive(ctx, t, jobs, lim, eval)
			t.Logf("allocation %v utility %.4f (prices %+v; %d predictions, %d of them joint checks); best %v %.4f of %d that fit",
				plan.pcts, plan.utility, plan.prices, plan.predictions, plan.rounds, best, bestU, feasible)
			if !plan.probe.fits {
				t.Fatalf("the allocation %v does not fit", plan.pcts)
			}
			if plan.utility < 0.98*bestU {
				t.Errorf("utility %.4f, the best %.4f: %.1f %% below, want within 2 %%", plan.utility, bestU, 100*(1-plan.utility/bestU))
			}
			mem := 0
			for j, p := range plan.pcts {
				if p > 0 {
					mem += jobs[j].memoryMiB
				}
			}
			if mem > tt.memory {
				t.Errorf("the allocation uses %d MiB of %d", mem, tt.memory)
			}
		})
	}
}

// Four jobs arrive one after another, each asking for 10–100 %: first come,
// first served gives each the largest percentage that fits next to the
// earlier ones (today's admission); joint allocation re-allocates every
// live job at each arrival (none below its 10 %). Reported: each job's
// percentage and the total weighted throughput after the last arrival,
// and who was denied. Joint never does worse, by the joint prediction.
func TestJointVersusFirstComeFirstServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ps, weights := arrivalJobs()
	h, ts := jointSetup(t, ps, 10)
	full := h.pol().jointEvalOf(ts)
	grid := pctGrid(10, 100, 10)
	lim := jointLimits{memoryMiB: 1 << 20, slots: 4}

	// First come, first served.
	fcfs := make([]int, len(ps))
	for n := range ps {
		for i := len(grid) - 1; i >= 0; i-- {
			fcfs[n] = grid[i]
			pr, err := full(ctx, fcfs)
			if err != nil {
				t.Fatal(err)
			}
			if pr.fits {
				break
			}
			fcfs[n] = 0
		}
	}
	// Joint: at each arrival, the live jobs and the new one.
	joint := make([]int, len(ps))
	predictions := 0
	for n := range ps {
		var jobs []jointJob
		for j := range len(ps) {
			g := []int{0}
			switch {
			case j < n && joint[j] > 0:
				g = grid
			case j == n:
				g = append([]int{0}, grid...)
			}
			jobs = append(jobs, jointJob{weight: weights[j], grid: g, memoryMiB: 2048})
		}
		plan, err := allocate(ctx, jobs, lim, full, 1)
		if err != nil {
			t.Fatal(err)
		}
		predictions += plan.predictions
		joint = plan.pcts
	}
	weighted := make([]jointJob, len(ps))
	for j, w := range weights {
		weighted[j] = jointJob{weight: w}
	}
	prF, prJ := predictBoth(ctx, t, full, fcfs, joint)
	uF, uJ := utility(weighted, prF), utility(weighted, prJ)
	t.Logf("first come, first served: %v, weighted throughput %.3f (throughputs %.3f)", fcfs, uF, prF.thr)
	t.Logf("joint:                    %v, weighted throughput %.3f (throughputs %.3f), %d predictions in all", joint, uJ, prJ.thr, predictions)
	if !prJ.fits || !prF.fits {
		t.Fatalf("an allocation does not fit: joint %v, first come %v", prJ.fits, prF.fits)
	}
	if !(uJ >= uF) {
		t.Errorf("joint %.3f below first come, first served %.3f", uJ, uF)
	}
}

// jointSetup is a harness whose SLO binds between every job at its lowest
// percentage and every job at 100 %, and the jobs as trainers.
func jointSetup(t *testing.T, profiles []*predictor.Profile, pctStep int) (*harness, []Trainer) {
	t.Helper()
	svc := bert()
	var ts []Trainer
	var pcts, lows []float64
	for _, p := range profiles {
		ts = append(ts, Trainer{Profile: p, Key: p.Key()})
		pcts, lows = append(pcts, 100), append(lows, float64(pctStep))
	}
	high := p99At(t, predictor.ModeMPS, svc, profiles, pcts)
	low := p99At(t, predictor.ModeMPS, svc, profiles, lows)
	slo := (low + 0.45*(high-low)) / 0.9
	return newHarness(t, predictor.ModeMPS, slo, func(c *Config) { c.PctStep = pctStep }), ts
}

// exhaustive is the best fitting allocation over every combination of the
// jobs' options, by the joint prediction's utility, and how many fit.
func exhaustive(ctx context.Context, t *testing.T, jobs []jointJob, lim jointLimits, eval jointEval) (best []int, bestU float64, feasible int) {
	t.Helper()
	idx := make([]int, len(jobs))
	bestU = -1
	for {
		pcts := make([]int, len(jobs))
		mem, slots := 0, 0
		for j, k := range idx {
			pcts[j] = jobs[j].grid[k]
			if pcts[j] > 0 {
				mem += jobs[j].memoryMiB
				slots++
			}
		}
		if mem <= lim.memoryMiB && slots <= lim.slots {
			pr, err := eval(ctx, pcts)
			if err != nil {
				t.Fatal(err)
			}
			if pr.fits {
				feasible++
				if u := utility(jobs, pr); u > bestU {
					best, bestU = pcts, u
				}
			}
		}
		j := 0
		for ; j < len(idx); j++ {
			if idx[j]++; idx[j] < len(jobs[j].grid) {
				break
			}
			idx[j] = 0
		}
		if j == len(idx) {
			return best, bestU, feasible
		}
	}
}
