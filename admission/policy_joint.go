package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// Joint allocation: several training jobs share what the inference SLOs
// leave, by per-resource shadow prices (after ElastiCo's decomposition of
// the multi-resource allocation into per-job choices). A job's utility is
// its weight times its throughput (the share of its solo speed it keeps).
//
// The search starts from every job at its lowest option, which must fit
// and keep to the memory and slot limits. Around the current allocation
// (the base) the real predictor gives each job's one-job moves: the whole
// utility with the job moved, and the SLO slack it takes, the worst
// service's held p99 over its limit against the base's. That is a
// separable, first-order model of the allocation, exact for one job's
// move, and it counts what trainers do to each other. On it each job picks
// the option of the highest utility less its priced uses of:
//
//   - slo: the slack the base leaves, 1 − its score;
//   - memory: its GPU memory over what is available to the jobs;
//   - slots: one of the free max_jobs slots.
//
// Each price is set by bisection (its upper end found by doubling), one
// resource at a time for a bounded number of passes: the lowest at which
// its resource is not overused. Uses only fall as a price rises, since
// each job's use grows with its percentage. Jobs the prices left out are
// then added back greedily while every resource has room. The choice is
// predicted jointly and kept only if it keeps to the limits, fits and does
// better; when it does not fit, the model's slack shrinks and the prices
// are set again. This repeats around the new allocation until nothing
// better fits, a few times at most. What is returned is only ever an
// allocation that the real predictor said fits, within the limits.

// jointJob is one job of a joint allocation: its weight, the percentages
// it may get (ascending; a 0 first means it may be left out) and its
// memory.
type jointJob struct {
	weight    float64
	grid      []int
	memoryMiB int
}

// jointLimits are the resources the jobs share besides the SLO slack.
type jointLimits struct {
	memoryMiB int // GPU memory available to the jobs of the problem
	slots     int // jobs that may run
}

// jointProbe is one prediction of the GPU with the jobs at pcts (0: the
// job does not run).
type jointProbe struct {
	fits      bool
	score     float64   // the worst service's held p99 over its limit
	soloScore float64   // the same with no job
	thr       []float64 // each job's throughput (0 when it does not run)
}

// jointEval predicts the GPU with each job at pcts[j] (0: absent).
type jointEval func(ctx context.Context, pcts []int) (jointProbe, error)

// jointPlan is an allocation and how it was found.
type jointPlan struct {
	pcts    []int
	utility float64 // Σ weight × throughput, from the joint prediction
	probe   jointProbe
	prices  JointPrices
	// rounds is how many joint predictions the search checked, and
	// predictions how many it made in all (the moves around each
	// allocation too; the model caches repeats).
	rounds, predictions int
}

// errJointInfeasible is returned when not even every job at its lowest
// option fits.
var errJointInfeasible = errors.New("joint allocation: no allocation fits, not even every job at its lowest percentage")

// jointRounds bounds the joint predictions of one allocation.
const jointRounds = 8

// jointCurves is, around a base allocation, what each job's options do
// when it alone moves there: the whole utility, and the SLO slack taken
// (the worst service's score over the base's).
type jointCurves struct {
	value [][]float64
	use   [][]float64
}

// curvesAround predicts each job at each of its options with the others
// at base (whose prediction is at): a first-order, separable model of the
// allocation around base, exact for one job's move. The predictions are
// independent: up to workers run at once.
func curvesAround(ctx context.Context, jobs []jointJob, eval jointEval, workers int, base []int, at jointProbe) (jointCurves, error) {
	n := len(jobs)
	cv := jointCurves{value: make([][]float64, n), use: make([][]float64, n)}
	baseU := utility(jobs, at)
	type point struct{ j, k int }
	var todo []point
	for j, job := range jobs {
		cv.value[j] = make([]float64, len(job.grid))
		cv.use[j] = make([]float64, len(job.grid))
		for k, p := range job.grid {
			if p == base[j] {
				cv.value[j][k] = baseU
				continue
			}
			todo = append(todo, point{j, k})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(workers, 1))
	for _, pt := range todo {
		g.Go(func() error {
			pcts := append([]int(nil), base...)
			pcts[pt.j] = jobs[pt.j].grid[pt.k]
			pr, err := eval(gctx, pcts)
			if err != nil {
				return err
			}
			// Each point is its own cell: no two goroutines write one.
			cv.value[pt.j][pt.k] = utility(jobs, pr)
			cv.use[pt.j][pt.k] = pr.score - at.score
			return nil
		})
	}
	return cv, g.Wait()
}

// jointIterations bounds the re-linearisations of one allocation.
const jointIterations = 4

// allocate finds the jobs' percentages (see the comment above). It starts
// from every job at its lowest option, which must fit; around the current
// allocation it predicts each job's moves (up to workers at once; eval
// must then be safe for concurrent use), prices the resources on that
// model and checks the choice jointly; a choice that fits and does better
// becomes the next allocation, until none does.
func allocate(ctx context.Context, jobs []jointJob, lim jointLimits, eval jointEval, workers int) (jointPlan, error) {
	for j, job := range jobs {
		if len(job.grid) == 0 || !(job.weight > 0) {
			return jointPlan{}, fmt.Errorf("joint allocation: job %d: want a grid and a weight > 0", j)
		}
	}
	var calls atomic.Int64
	counted := eval
	eval = func(ctx context.Context, pcts []int) (jointProbe, error) {
		calls.Add(1)
		return counted(ctx, pcts)
	}
	base := make([]int, len(jobs))
	for j, job := range jobs {
		base[j] = job.grid[0]
	}
	at, err := eval(ctx, base)
	if err != nil {
		return jointPlan{}, err
	}
	plan := jointPlan{pcts: base, probe: at, utility: utility(jobs, at), rounds: 1}
	if !at.fits || !withinLimits(jobs, lim, base) {
		plan.predictions = int(calls.Load())
		return plan, errJointInfeasible
	}
	for range jointIterations {
		cv, err := curvesAround(ctx, jobs, eval, workers, plan.pcts, plan.probe)
		if err != nil {
			return jointPlan{}, err
		}
		budget := 1 - plan.probe.score // the slack left at the base
		moved := false
		for range jointRounds {
			prices, choice := priceJobs(jobs, lim, cv, budget)
			pcts := make([]int, len(jobs))
			for j, k := range choice {
				pcts[j] = jobs[j].grid[k]
			}
			if !withinLimits(jobs, lim, pcts) {
				break // the prices could not keep memory or slots in bounds: stay at the base
			}
			pr, err := eval(ctx, pcts)
			if err != nil {
				return jointPlan{}, err
			}
			plan.rounds++
			if !pr.fits {
				// The moves did not add up: together the jobs took more
				// than the sum of their parts. Leave the model less slack.
				budget *= 0.7
				continue
			}
			if u := utility(jobs, pr); u > plan.utility*(1+1e-9) {
				plan.pcts, plan.probe, plan.utility, plan.prices = pcts, pr, u, prices
				moved = true
			}
			break
		}
		if !moved {
			break
		}
	}
	plan.predictions = int(calls.Load())
	return plan, nil
}

// sloPrice says what an allocation's SLO price means, for a decision's or
// an event's reason.
func sloPrice(p float64) string {
	if p == 0 {
		return "the SLO slack not binding: the jobs' slowing of each other set the shares"
	}
	return fmt.Sprintf("SLO slack priced at %.3g", p)
}

// utility is Σ weight × throughput of a joint prediction.
func utility(jobs []jointJob, pr jointProbe) float64 {
	u := 0.0
	for j, job := range jobs {
		u += job.weight * pr.thr[j]
	}
	return u
}

// priceJobs sets the prices so that no resource is overused (the SLO slack
// up to budget), each at the lowest such price, and returns them with each
// job's chosen option, completed greedily (complete). A price's upper end
// is found by doubling: a job whose use is a small share of its resource
// needs a price of about its value over that share. The coordinate passes
// are bounded; the caller checks memory and slots on the result, which
// the prices only steer.
func priceJobs(jobs []jointJob, lim jointLimits, cv jointCurves, budget float64) (JointPrices, []int) {
	var pr JointPrices
	choose := func() []int { return chooseAll(jobs, lim, cv, pr) }
	over := func(c []int) [3]float64 {
		slo, mem, slots := uses(jobs, cv, c)
		return [3]float64{slo - budget, float64(mem - lim.memoryMiB), float64(slots - lim.slots)}
	}
	// Beyond most no price helps: the lowest options themselves overuse.
	const most = 1e15
	for range 8 { // coordinate-wise until no price moves
		moved := false
		for r := range 3 {
			price := [3]*float64{&pr.SLO, &pr.Memory, &pr.Slots}[r]
			excess := func() float64 { return over(choose())[r] }
			old := *price
			*price = 0
			if excess() > 1e-12 {
				hi := 1.0
				for *price = hi; excess() > 1e-12 && hi < most; *price = hi {
					hi *= 2
				}
				lo := hi / 2
				if hi == 1 {
					lo = 0
				}
				for range 60 {
					*price = (lo + hi) / 2
					if excess() > 1e-12 {
						lo = *price
					} else {
						hi = *price
					}
				}
				*price = hi
			}
			moved = moved || math.Abs(*price-old) > 1e-9*max(1, old)
		}
		if !moved {
			break
		}
	}
	return pr, complete(jobs, lim, cv, budget, choose())
}

// complete raises, one at a time, jobs the prices left at their lowest
// option to the best option that keeps every resource within its limit:
// jobs alike are priced out together, where room is left for some of them.
// The highest value first.
func complete(jobs []jointJob, lim jointLimits, cv jointCurves, budget float64, choice []int) []int {
	for {
		bestJ, bestK, bestGain := -1, 0, 0.0
		for j, k := range choice {
			if k != 0 {
				continue
			}
			for k2 := 1; k2 < len(jobs[j].grid); k2++ {
				trial := append([]int(nil), choice...)
				trial[j] = k2
				slo, mem, slots := uses(jobs, cv, trial)
				if slo > budget+1e-12 || mem > lim.memoryMiB || slots > lim.slots {
					continue
				}
				if gain := cv.value[j][k2] - cv.value[j][0]; gain > bestGain+1e-12 {
					bestJ, bestK, bestGain = j, k2, gain
				}
			}
		}
		if bestJ < 0 {
			return choice
		}
		choice[bestJ] = bestK
	}
}

// withinLimits reports whether pcts keep to the memory and slot limits.
func withinLimits(jobs []jointJob, lim jointLimits, pcts []int) bool {
	mem, slots := 0, 0
	for j, p := range pcts {
		if p > 0 {
			mem += jobs[j].memoryMiB
			slots++
		}
	}
	return mem <= lim.memoryMiB && slots <= lim.slots
}

// uses adds up what a choice of options (indexes into each job's grid)
// takes of each resource: the SLO slack by cv, memory and slots by the
// jobs that run.
func uses(jobs []jointJob, cv jointCurves, choice []int) (slo float64, mem, slots int) {
	for j, k := range choice {
		slo += cv.use[j][k]
		if jobs[j].grid[k] > 0 {
			mem += jobs[j].memoryMiB
			slots++
		}
	}
	return slo, mem, slots
}

// chooseAll is each job's best option at prices pr: the highest value less
// its priced uses, ties to the lower percentage. An option the job cannot
// have at all (more memory or slots than there are, an SLO use no price
// can pay: nothing fits) is not chosen while another is left.
func chooseAll(jobs []jointJob, lim jointLimits, cv jointCurves, pr JointPrices) []int {
	out := make([]int, len(jobs))
	for j, job := range jobs {
		best, bestNet := 0, math.Inf(-1)
		for k, p := range job.grid {
			use := cv.use[j][k]
			if math.IsInf(use, 1) || p > 0 && (job.memoryMiB > lim.memoryMiB || lim.slots < 1) {
				continue
			}
			net := cv.value[j][k] - pr.SLO*use
			if p > 0 {
				if lim.memoryMiB > 0 {
					net -= pr.Memory * float64(job.memoryMiB) / float64(lim.memoryMiB)
				}
				net -= pr.Slots / float64(lim.slots)
			}
			if net > bestNet+1e-12 {
				best, bestNet = k, net
			}
		}
		out[j] = best
	}
	return out
}

// jointEvalOf predicts with the real predictor, as a decision does: the
// trainers ts (their profiles) at the percentages asked, those at 0 left
// out.
func (pol *policy) jointEvalOf(ts []Trainer) jointEval {
	return func(ctx context.Context, pcts []int) (jointProbe, error) {
		var run []Trainer
		var at []int
		for j, p := range pcts {
			if p > 0 {
				t := ts[j]
				t.Pct = p
				run = append(run, t)
				at = append(at, j)
			}
		}
		_, pr, err := pol.predictAll(ctx, run)
		if err != nil {
			return jointProbe{}, err
		}
		out := jointProbe{fits: pr.fits, score: pr.score, soloScore: pr.soloScore, thr: make([]float64, len(pcts))}
		if len(run) > 0 && len(pr.throughput) != len(run) {
			return jointProbe{}, errNoThroughput
		}
		for k, j := range at {
			out.thr[j] = pr.throughput[k]
		}
		return out, nil
	}
}

// jointBudget bounds the time one raise check or guard re-plan spends on
// joint allocation.
const jointBudget = 2 * time.Second

// allocateLive allocates the live leases' jobs (trainers ts) for a raise or
// a guard re-plan: their memory and slots are theirs already, so only the
// SLO slack is shared. It also predicts the allocation also, to compare
// with. A cold allocation of several real trainers takes seconds, and the
// guard must not wait on it when load rises: past jointBudget it returns
// errNotJoint.
func (pol *policy) allocateLive(ctx context.Context, ts []Trainer, jobs []jointJob, also []int) (jointPlan, jointProbe, error) {
	jctx, cancel := context.WithTimeout(ctx, jointBudget)
	defer cancel()
	eval := pol.jointEvalOf(ts)
	plan, err := allocate(jctx, jobs, jointLimits{memoryMiB: math.MaxInt32, slots: len(jobs)}, eval, pol.cfg.SearchWorkers)
	var other jointProbe
	if err == nil {
		other, err = eval(jctx, also)
	}
	if err != nil && ctx.Err() == nil && jctx.Err() != nil {
		err = errNotJoint
	}
	return plan, other, err
}

// errNoThroughput is returned when the predictor says nothing of the
// trainers' throughput (a predictor other than Model): there is then
// nothing to allocate by.
var errNoThroughput = errors.New("joint allocation: the predictor gives no trainer throughput")
