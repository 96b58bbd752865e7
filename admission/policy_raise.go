package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// raising is what a raise check says, lease by lease in the order of those
// planned for: each one's percentage after the raise, whether any is
// higher (room), and notes, when not nil, saying for each lease how the
// room was shared (its raise event's reason ends with it).
type raising struct {
	pcts  []int
	notes []string
	room  bool
}

// raisePlan says how far the live leases may rise now. With two or more
// leases that may rise, the room is shared by joint allocation
// (jointRaise); otherwise, or when the predictor gives no throughput, the
// leases are raised one at a time (greedyRaise). Whether a lease is
// raised, once the room has held, is the controller's (guard_raise.go).
func (pol *policy) raisePlan(ctx context.Context, live []liveLease) (raising, error) {
	pcts, notes, room, err := pol.jointRaise(ctx, live)
	if err == nil || !errors.Is(err, errNotJoint) {
		return raising{pcts: pcts, notes: notes, room: room}, err
	}
	pcts, room, err = pol.greedyRaise(ctx, live)
	return raising{pcts: pcts, room: room}, err
}

// errNotJoint says a raise is not one for joint allocation.
var errNotJoint = errors.New("not a joint raise")

// raisable reports whether a lease may be raised now, by at least
// Config.MinMovePct.
func (pol *policy) raisable(e *liveLease) bool {
	l := &e.lease
	return !l.Revoked && !l.awaitingRestart() && len(pol.raiseGrid(e)) > 1
}

// raiseGrid is what a lease may rise to: its percentage, then those of its
// grid (Guard.RaiseStepPct apart, else PctStep) up to its ceiling at
// least Config.MinMovePct above it, and below
// e.raiseBelow when that is set (a percentage a recent raise reached and
// the guard had to lower it from).
func (pol *policy) raiseGrid(e *liveLease) []int {
	l := &e.lease
	grid := movesFrom(l.Pct, pctGrid(l.Pct, l.ceiling(), cmp.Or(pol.cfg.Guard.RaiseStepPct, pol.cfg.PctStep)), pol.cfg.Guard.MinMovePct)
	if e.raiseBelow > 0 {
		grid = slices.DeleteFunc(grid, func(p int) bool { return p > l.Pct && p >= e.raiseBelow })
	}
	return grid
}

// lowerGrid is what a live lease may be lowered to to make room for an
// admit: down to its min_pct, at least Config.MinMovePct below its
// percentage, then the percentage itself.
func (pol *policy) lowerGrid(l *Lease) []int {
	return movesFrom(l.Pct, pctGrid(min(max(l.MinPct, 1), l.Pct), l.Pct, pol.cfg.PctStep), pol.cfg.Guard.MinMovePct)
}

// movesFrom keeps of grid (ascending, holding cur) cur and the
// percentages at least minMove away from it.
func movesFrom(cur int, grid []int, minMove int) []int {
	out := make([]int, 0, len(grid))
	for _, p := range grid {
		if p == cur || p <= cur-minMove || p >= cur+minMove {
			out = append(out, p)
		}
	}
	return out
}

// jointRaise shares the room among the leases that may rise by joint
// allocation: each lease between its percentage and its ceiling (the
// others where they are), valued at its weight × throughput. The leases'
// memory and slots are theirs already, so only the SLO slack is priced.
func (pol *policy) jointRaise(ctx context.Context, live []liveLease) ([]int, []string, bool, error) {
	n := 0
	for i := range live {
		if pol.raisable(&live[i]) {
			n++
		}
	}
	if n < 2 {
		return nil, nil, false, errNotJoint
	}
	ts := make([]Trainer, len(live))
	jobs := make([]jointJob, len(live))
	for i, e := range live {
		l := &e.lease
		ts[i] = Trainer{Profile: l.Profile, Key: e.key}
		grid := []int{l.Pct}
		if pol.raisable(&e) {
			grid = pol.raiseGrid(&e)
		}
		jobs[i] = jointJob{weight: pol.weight(l.Weight), grid: grid, memoryMiB: l.MemoryMiB}
	}
	// Past the budget this round raises one lease at a time; the
	// predictions made so far are cached, so a later round finishes.
	plan, before, err := pol.allocateLive(ctx, ts, jobs, currentPcts(live)) // before: cached, the allocation's start
	switch {
	case errors.Is(err, errNoThroughput), errors.Is(err, errNotJoint):
		return nil, nil, false, errNotJoint
	case errors.Is(err, errJointInfeasible):
		// What runs does not fit: the guard lowers leases; nothing rises.
		return currentPcts(live), nil, false, nil
	case err != nil:
		return nil, nil, false, err
	}
	room := false
	notes := make([]string, len(live))
	for i, e := range live {
		room = room || plan.pcts[i] > e.lease.Pct
		notes[i] = fmt.Sprintf("the room was shared by joint allocation among %d leases (%s): at weight %g this job's predicted throughput goes from %.1f %% to %.1f %% of its solo speed, the leases' weighted throughput from %.3f to %.3f",
			len(live), sloPrice(plan.prices.SLO), jobs[i].weight, 100*before.thr[i], 100*plan.probe.thr[i], utility(jobs, before), plan.utility)
	}
	return plan.pcts, notes, room, nil
}

// currentPcts is each lease's percentage.
func currentPcts(live []liveLease) []int {
	pcts := make([]int, len(live))
	for i, e := range live {
		pcts[i] = e.lease.Pct
	}
	return pcts
}

// greedyRaise raises the leases one at a time, highest priority first,
// then oldest (victimOrder backwards), each to the largest percentage up
// to its ceiling at which everything still fits.
func (pol *policy) greedyRaise(ctx context.Context, live []liveLease) ([]int, bool, error) {
	pcts := currentPcts(live)
	order := victimOrder(live)
	slices.Reverse(order)
	room := false
	for _, i := range order {
		if !pol.raisable(&live[i]) {
			continue
		}
		grid := pol.raiseGrid(&live[i])
		best, err := searchGrid(ctx, grid, pol.cfg.SearchWorkers, func(ctx context.Context, k int) (probe, error) {
			trial := slices.Clone(pcts)
			trial[i] = grid[k]
			ts := make([]Trainer, len(live))
			for j, e := range live {
				ts[j] = Trainer{Profile: e.lease.Profile, Key: e.key, Pct: trial[j]}
			}
			_, p, err := pol.predictAll(ctx, ts)
			return p, err
		}, nil)
		if err != nil {
			return nil, false, err
		}
		if best > 0 {
			pcts[i], room = grid[best], true
		}
	}
	return pcts, room, nil
}
