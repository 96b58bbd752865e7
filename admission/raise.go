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
// found room to raise that lease, and no plan lowered it meanwhile. The
// leases are taken highest priority first, then oldest (victimOrder
// backwards), each raised to the largest percentage up to its max_pct at
// which everything still fits. A raised lease gets a raise event: the
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
	pcts, _, err := s.eval.raisePlan(ctx, s.live)
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
	events, serr := c.applyRaise(ctx, s.live, ripe, now)
	c.mu.Unlock()
	c.signal()
	perr := c.publish(ctx, events)
	return events, errors.Join(serr, perr)
}

// raisePlan returns each lease's percentage after a raise, and whether any
// is higher. It predicts: call it on a frozen controller, without the lock.
func (c *Controller) raisePlan(ctx context.Context, live []entry) ([]int, bool, error) {
	pcts := make([]int, len(live))
	for i, e := range live {
		pcts[i] = e.lease.Pct
	}
	order := victimOrder(live)
	slices.Reverse(order)
	room := false
	for _, i := range order {
		l := &live[i].lease
		if l.Revoked || l.awaitingRestart() || l.Pct >= l.ceiling() {
			continue
		}
		grid := pctGrid(l.Pct, l.ceiling(), c.cfg.PctStep)
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
func (c *Controller) applyRaise(ctx context.Context, planned []entry, pcts []int, now time.Time) ([]Event, error) {
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
		if err := c.update(ctx, "raise", e, l); err != nil {
			errs = append(errs, err)
			continue
		}
		c.changedLocked()
		events = append(events, Event{Type: EventRaise, LeaseID: l.ID, JobID: l.JobID, Pct: l.Pct, Env: c.Env(l), Time: now,
			Reason: fmt.Sprintf("the margin has held for %s: the job may run at %d %% instead of %d %% (restart its workers with %s=%d and register them), or stay as it is",
				held, l.Pct, old, EnvActiveThreads, l.Pct)})
	}
	return events, errors.Join(errs...)
}
