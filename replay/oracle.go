package replay

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/colocd/colocd/admission"
)

// The oracle is no policy colocd has: the schedule of the training job's
// percentage, minute by minute, that does the most work with every judged
// minute within the SLO, found in hindsight on the simulated server
// itself, with at most OracleChangesPerHour changes of the percentage an
// hour (each costing the launcher a restart, Launcher.Restart with no
// work, as a throttle or raise costs it under the guard). It is how far
// any guard could have gone: every policy's work is reported against it
// (Result.WorkVsOracle).
//
// It is found in three steps:
//
//  1. the server runs the whole trace at each percentage of the grid
//     (and at 0), which gives each minute's p99 at each constant
//     percentage, and so each minute's cap: the largest percentage that
//     kept that minute within the SLO (or the server alone's p99, when
//     it alone is over);
//  2. a dynamic programme chooses the schedule under the caps with the
//     most work, a change costing its restart, within the budget of
//     changes;
//  3. the server runs that schedule; a judged minute over the SLO lowers
//     its cap one grid step (or, when it already ran at 0, the minute
//     before's, whose backlog it inherited), and steps 2 and 3 repeat, at
//     most oracleRounds times, until the schedule keeps every minute the
//     server alone keeps; a constant percentage that does more (one of
//     step 1's runs with no minute over but the server alone's) is the
//     oracle instead.
//
// What it reports is the last schedule the server ran: found by search,
// so a better one may exist (a minute's cap is measured after minutes at
// the same percentage, which may leave it more backlog than a schedule
// would); its work is a floor of the best, and a policy's share of it is,
// if anything, flattering.
const Oracle Policy = "oracle"

// OracleLimit is the oracle held to the guard's own limit, the SLO less
// admission.headroom, instead of the SLO: what a guard that knew the
// server exactly, minute by minute and in advance, could do with the
// headroom it keeps. The oracle's work less this one's is what the
// headroom costs; this one's less a guard's, what the guard's knowledge
// of the server costs (Result.WorkVsOracleLimit). It is judged, as every
// policy, against the SLO.
const OracleLimit Policy = "oracle-limit"

// OracleChangesPerHour is the oracle's budget of changes: one each five
// minutes on average, what the guard's own default raise_after allows.
const OracleChangesPerHour = 12

// oracleRounds bounds the oracle's verifying runs (step 3).
const oracleRounds = 12

// constantRun is each judged minute's p99, by minute, of a run at one
// constant percentage.
type constantRun map[int]float64

// constant runs the server at pct over the whole trace, once per
// percentage (cached), and returns the run and its minutes.
func (w *world) constant(ctx context.Context, pct int) (Result, constantRun, error) {
	res, ok := w.constants[pct]
	if !ok {
		var err error
		if res, err = w.schedule(ctx, func(time.Duration) int { return pct }, 0); err != nil {
			return res, nil, err
		}
		if w.constants == nil {
			w.constants = map[int]Result{}
		}
		w.constants[pct] = res
	}
	r := constantRun{}
	for _, m := range res.PerMinute {
		r[m.Minute] = m.P99MS
	}
	return res, r, nil
}

// schedule runs the server with the training job at pct(t), t the offset
// from the trace's start, each change of it stopping the job for restart
// first, and returns what a policy's result holds: the work, the judged
// minutes, the series and the changes.
func (w *world) schedule(ctx context.Context, pct func(time.Duration) int, restart time.Duration) (Result, error) {
	cfg := &w.cfg
	minutes := tally{}
	for _, r := range cfg.Trace {
		minutes.arrive(start.Add(r.Arrival))
	}
	running := 0
	srv, err := w.server(minutes, func() int { return running })
	if err != nil {
		return Result{}, err
	}
	res := Result{slo: cfg.Service.SLOP99MS}
	interval := cmp.Or(cfg.Observe.Interval, time.Second)
	end := start.Add(cfg.Trace[len(cfg.Trace)-1].Arrival)
	target, upAt := 0, time.Duration(0)
	next := 0
	for now := start; now.Before(end); now = now.Add(time.Second) {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		at := now.Sub(start)
		if p := pct(at); p != target {
			if p > 0 {
				upAt = at + restart
			}
			if at > 0 || target != 0 {
				res.Changes++
			}
			target = p
		}
		running = target
		if at < upAt {
			running = 0
		}
		if err := srv.Advance(now); err != nil {
			return res, err
		}
		res.WorkPctSeconds += float64(running)
		if at%interval == 0 {
			n := next
			for next < len(cfg.Trace) && cfg.Trace[next].Arrival <= at {
				next++
			}
			res.Series = append(res.Series, Sample{At: at, ArrivalRPS: float64(next-n) / interval.Seconds(), ObservedRPS: math.NaN(), ForecastRPS: math.NaN(), Pct: running})
		}
	}
	if err := srv.Advance(end); err != nil {
		return res, err
	}
	res.PerMinute = minutes.judge(cfg.MinRequests)
	res.tally()
	return res, nil
}

// grid is the percentages the launcher would run at, descending, then 0.
func (w *world) grid() []int {
	cfg := &w.cfg
	step := cmp.Or(cfg.Settings.PctStep, admission.DefaultPctStep)
	var pcts []int
	for p := cfg.Launcher.MaxPct; p >= max(1, cfg.Launcher.MinPct); p -= step {
		pcts = append(pcts, p)
	}
	return append(pcts, 0)
}

// oracle finds the oracle's schedule and returns its run (Oracle, or
// OracleLimit under the guard's limit).
func (w *world) oracle(ctx context.Context, p Policy) (Result, error) {
	cfg := &w.cfg
	limit := cfg.Service.SLOP99MS
	if p == OracleLimit {
		limit *= 1 - cfg.Settings.Headroom
	}
	grid := w.grid()
	slices.Reverse(grid) // ascending, 0 first
	runs := make([]constantRun, len(grid))
	for i, p := range grid {
		_, r, err := w.constant(ctx, p)
		if err != nil {
			return Result{}, err
		}
		runs[i] = r
	}
	span := cfg.Trace[len(cfg.Trace)-1].Arrival
	n := int(span/time.Minute) + 1
	// caps[m] is the index in grid of minute m's cap; solo[m] that the
	// server alone is over the limit then (nothing the job does keeps it).
	caps := make([]int, n)
	solo := make([]bool, n)
	for m := range n {
		for i := range grid {
			if p99, judged := runs[i][m]; !judged || p99 <= limit {
				caps[m] = i
			} else if i == 0 {
				solo[m] = true
			}
		}
	}
	budget := int(math.Ceil(OracleChangesPerHour * span.Hours()))
	restart := cfg.Launcher.Restart
	var res Result
	for round := 0; ; round++ {
		sched := bestSchedule(grid, caps, budget, restart)
		var err error
		res, err = w.schedule(ctx, func(at time.Duration) int { return grid[sched[min(n-1, int(at/time.Minute))]] }, restart)
		if err != nil {
			return res, err
		}
		lowered := false
		for _, m := range res.PerMinute {
			if m.P99MS <= limit || m.Minute >= n || solo[m.Minute] {
				continue
			}
			switch k := m.Minute; {
			case sched[k] > 0:
				caps[k] = sched[k] - 1
				lowered = true
			case k > 0 && sched[k-1] > 0:
				caps[k-1] = sched[k-1] - 1
				lowered = true
			}
		}
		if !lowered || round+1 >= oracleRounds {
			break
		}
	}
	// A constant percentage is a schedule too: the oracle never does less
	// than the best of them (best-static).
	for _, pct := range grid[1:] {
		c := w.constants[pct]
		if over(c, limit) <= over(w.constants[0], limit) && c.WorkPctSeconds > res.WorkPctSeconds {
			res = c
		}
	}
	res.Policy = p
	return res, nil
}

// over counts r's judged minutes above limit.
func over(r Result, limit float64) int {
	n := 0
	for _, m := range r.PerMinute {
		if m.P99MS > limit {
			n++
		}
	}
	return n
}

// bestSchedule returns, per minute, the index in grid (ascending
// percentages, grid[0] = 0) of the schedule with the most work under
// caps, with at most budget changes after the first minute's choice, each
// start at a new percentage costing restart of it: a dynamic programme
// over (minute, the minute before's percentage, changes left).
func bestSchedule(grid, caps []int, budget int, restart time.Duration) []int {
	n, g, k := len(caps), len(grid), budget+1
	lost := min(60, restart.Seconds())
	at := func(j, c int) int { return j*k + c }
	// next[at(from, c)] is the most work of the minutes after the one
	// being filled, with it at from and c changes left.
	next := make([]float64, g*k)
	choice := make([][]int, n)
	for m := n - 1; m >= 0; m-- {
		cur := make([]float64, g*k)
		choice[m] = make([]int, g*k)
		for from := range g {
			for c := range k {
				best, arg := math.Inf(-1), 0
				for j := 0; j <= caps[m]; j++ {
					cost, work := 0, 60*float64(grid[j])
					if j != from {
						if m > 0 {
							cost = 1
						}
						if grid[j] > 0 {
							work -= lost * float64(grid[j])
						}
					}
					if cost > c {
						continue
					}
					if v := work + next[at(j, c-cost)]; v > best {
						best, arg = v, j
					}
				}
				cur[at(from, c)], choice[m][at(from, c)] = best, arg
			}
		}
		next = cur
	}
	out := make([]int, n)
	from, c := 0, budget // before the trace the job is stopped
	for m := range n {
		j := choice[m][at(from, c)]
		if j != from && m > 0 {
			c--
		}
		out[m], from = j, j
	}
	return out
}
