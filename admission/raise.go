package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/colocd/colocd/predictor"
)

// raiseCheck is how often the guard looks for room to raise a lowered
// lease.
const raiseCheck = 5 * time.Second

// raise offers lowered leases a higher percentage once the margin has held
// for each: every check (one each raiseCheck) since Config.RaiseAfter ago
// found room to raise that lease, and no plan lowered it meanwhile. How
// the room is shared is raisePlan's: by joint allocation when several
// leases may rise, else the one lease to the largest percentage up to its
// max_pct at which everything still fits. A raised lease gets a raise event: the
// launcher may restart its workers at the new percentage and register them,
// or ignore it; predictions use the new percentage from now on either way,
// which only errs on the safe side. MPS mode only.
func (c *Controller) raise(ctx context.Context) ([]Event, error) {
	c.mu.Lock()
	now := time.Now()
	if c.cfg.Mode != predictor.ModeMPS || now.Before(c.raiseAt) {
		c.mu.Unlock()
		return nil, nil
	}
	c.raiseAt = now.Add(raiseCheck)
	s := c.snapshotLocked()
	c.mu.Unlock()
	pcts, notes, _, err := s.eval.raisePlan(ctx, s.live)
	if err != nil {
		return nil, fmt.Errorf("raise: %w", err)
	}
	c.mu.Lock()
	room := map[string]time.Time{}
	ripe := slices.Clone(pcts)
	ripeAny := false
	for i, e := range s.live {
		id := e.lease.ID
		if pcts[i] <= e.lease.Pct {
			continue
		}
		since, ok := c.raiseRoom[id]
		if !ok {
			since = now
		}
		room[id] = since
		if now.Sub(since) < c.cfg.RaiseAfter {
			ripe[i] = e.lease.Pct // not yet: the room must hold
			continue
		}
		ripeAny = true
	}
	c.raiseRoom = room // leases with no room now, or gone, start again
	if !ripeAny || !c.unchangedLocked(s, time.Now()) {
		c.mu.Unlock()
		return nil, nil
	}
	events, serr := c.applyRaise(ctx, s.live, ripe, notes, now)
	c.mu.Unlock()
	c.signal()
	perr := c.publish(ctx, events)
	return events, errors.Join(serr, perr)
}

// raisePlan returns each lease's percentage after a raise, and whether any
// is higher. With two or more leases that may rise, the room is shared by
// joint allocation (jointRaise); otherwise, or when the predictor gives no
// throughput, the leases are raised one at a time (greedyRaise). It
// predicts: call it on a frozen controller, without the lock.
//
// notes, when not nil, say for each lease how the room was shared (its
// raise event's reason ends with it).
func (c *Controller) raisePlan(ctx context.Context, live []entry) (pcts []int, notes []string, room bool, err error) {
	pcts, notes, room, err = c.jointRaise(ctx, live)
	if err == nil || !errors.Is(err, errNotJoint) {
		return pcts, notes, room, err
	}
	pcts, room, err = c.greedyRaise(ctx, live)
	return pcts, nil, room, err
}

// errNotJoint says a raise is not one for joint allocation.
var errNotJoint = errors.New("not a joint raise")

// raisable reports whether a lease may be raised now, by at least
// Config.MinMovePct.
func (c *Controller) raisable(l *Lease) bool {
	return !l.Revoked && !l.awaitingRestart() && l.ceiling()-l.Pct >= c.cfg.MinMovePct
}

// raiseGrid is what a raisable lease may rise to: its percentage, then
// those of its grid at least Config.MinMovePct above it.
func (c *Controller) raiseGrid(l *Lease) []int {
	return movesFrom(l.Pct, pctGrid(l.Pct, l.ceiling(), c.cfg.PctStep), c.cfg.MinMovePct)
}

// lowerGrid is what a live lease may be lowered to to make room for an
// admit: down to its min_pct, at least Config.MinMovePct below its
// percentage, then the percentage itself.
func (c *Controller) lowerGrid(l *Lease) []int {
	return movesFrom(l.Pct, pctGrid(min(max(l.MinPct, 1), l.Pct), l.Pct, c.cfg.PctStep), c.cfg.MinMovePct)
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
func (c *Controller) jointRaise(ctx context.Context, live []entry) ([]int, []string, bool, error) {
	n := 0
	for i := range live {
		if c.raisable(&live[i].lease) {
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
		if c.raisable(l) {
			grid = c.raiseGrid(l)
		}
		jobs[i] = jointJob{weight: c.weight(l.Weight), grid: grid, memoryMiB: l.MemoryMiB}
	}
	// Past the budget this round raises one lease at a time; the
	// predictions made so far are cached, so a later round finishes.
	plan, before, err := c.allocateLive(ctx, ts, jobs, currentPcts(live)) // before: cached, the allocation's start
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
func currentPcts(live []entry) []int {
	pcts := make([]int, len(live))
	for i, e := range live {
		pcts[i] = e.lease.Pct
	}
	return pcts
}

// greedyRaise raises the leases one at a time, highest priority first,
// then oldest (victimOrder backwards), each to the largest percentage up
// to its ceiling at which everything still fits.
func (c *Controller) greedyRaise(ctx context.Context, live []entry) ([]int, bool, error) {
	pcts := currentPcts(live)
	order := victimOrder(live)
	slices.Reverse(order)
	room := false
	for _, i := range order {
		l := &live[i].lease
		if !c.raisable(l) {
			continue
		}
		grid := c.raiseGrid(l)
		best, err := searchGrid(ctx, grid, c.cfg.SearchWorkers, func(ctx context.Context, k int) (probe, error) {
			trial := slices.Clone(pcts)
			trial[i] = grid[k]
			ts := make([]Trainer, len(live))
			for j, e := range live {
				ts[j] = Trainer{Profile: e.lease.Profile, Key: e.key, Pct: trial[j]}
			}
			_, p, err := c.predictAll(ctx, ts)
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

// applyRaise stores the raised leases and returns their raise events.
// c.mu is held, and released while a lease's record is written.
func (c *Controller) applyRaise(ctx context.Context, planned []entry, pcts []int, notes []string, now time.Time) ([]Event, error) {
	var events []Event
	var errs []error
	for i := range planned {
		e, ok := c.leases[planned[i].lease.ID]
		if ok {
			c.waitWrittenLocked(e)
			e, ok = c.leases[planned[i].lease.ID]
		}
		held := now.Sub(c.raiseRoom[planned[i].lease.ID]).Round(time.Second)
		now := time.Now()
		if !ok || !e.liveAt(now) || e.lease.Revoked || pcts[i] <= e.lease.Pct {
			continue
		}
		delete(c.raiseRoom, e.lease.ID)
		l := e.lease.clone()
		old := l.Pct
		l.Pct = pcts[i]
		// A raise takes capacity, as a grant does: decisions see the raised
		// percentage while its record is written (a snapshot taken before
		// cannot commit), and lose it again if the store refuses.
		e.lease.Pct = l.Pct
		c.changedLocked()
		if err := c.update(ctx, "raise", e, l); err != nil {
			e.lease.Pct = old
			c.freedLocked()
			errs = append(errs, err)
			continue
		}
		reason := fmt.Sprintf("the margin has held for %s: the job may run at %d %% instead of %d %% (restart its workers with %s=%d and register them), or stay as it is",
			held, l.Pct, old, EnvActiveThreads, l.Pct)
		if i < len(notes) && notes[i] != "" {
			reason += "; " + notes[i]
		}
		events = append(events, Event{Type: EventRaise, LeaseID: l.ID, JobID: l.JobID, Pct: l.Pct, Env: c.Env(l), Time: now, Reason: reason})
	}
	return events, errors.Join(errs...)
}
