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
func (g *guard) raise(ctx context.Context) ([]Event, error) {
	c := g.c
	c.mu.Lock()
	now := c.now()
	if c.cfg.Mode != predictor.ModeMPS || now.Before(g.raiseAt) {
		c.mu.Unlock()
		return nil, nil
	}
	g.raiseAt = now.Add(raiseCheck)
	s := c.snapshotLocked()
	c.mu.Unlock()
	r, err := s.pol.raisePlan(ctx, s.live)
	if err != nil {
		return nil, fmt.Errorf("raise: %w", err)
	}
	r.pcts = s.pol.capRaises(&s.view, r.pcts)
	c.mu.Lock()
	room := map[string]time.Time{}
	ripe := slices.Clone(r.pcts)
	ripeAny := false
	for i, e := range s.live {
		id := e.lease.ID
		if r.pcts[i] <= e.lease.Pct {
			continue
		}
		since, ok := g.raiseRoom[id]
		if !ok {
			since = now
		}
		room[id] = since
		if now.Sub(since) < g.raiseHoldLocked(e.key) {
			ripe[i] = e.lease.Pct // not yet: the room must hold
			continue
		}
		ripeAny = true
	}
	g.raiseRoom = room // leases with no room now, or gone, start again
	if !ripeAny || !c.unchangedLocked(s, c.now()) {
		c.mu.Unlock()
		return nil, nil
	}
	events, serr := g.applyRaise(ctx, s.live, ripe, r.notes, now)
	c.mu.Unlock()
	c.signal()
	perr := c.publish(ctx, events)
	return events, errors.Join(serr, perr)
}

// applyRaise stores the raised leases and returns their raise events.
// c.mu is held, and released while a lease's record is written.
func (g *guard) applyRaise(ctx context.Context, planned []liveLease, pcts []int, notes []string, now time.Time) ([]Event, error) {
	c := g.c
	var events []Event
	var errs []error
	for i := range planned {
		e, ok := c.leases[planned[i].lease.ID]
		if ok {
			c.waitWrittenLocked(e)
			e, ok = c.leases[planned[i].lease.ID]
		}
		held := now.Sub(g.raiseRoom[planned[i].lease.ID]).Round(time.Second)
		now := c.now()
		if !ok || !e.liveAt(now) || e.lease.Revoked || pcts[i] <= e.lease.Pct {
			continue
		}
		delete(g.raiseRoom, e.lease.ID)
		l := e.lease.clone()
		old := l.Pct
		g.holds.raised(l.ID, pcts[i], now)
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

// raiseHoldLocked is how long the room must hold before a lease of
// trainer is raised: Guard.ExploreAfter when the guard has learned that
// trainer's response beside every service (guard_response.go), Guard.RaiseAfter
// otherwise. c.mu is held.
func (g *guard) raiseHoldLocked(trainer predictor.ProfileKey) time.Duration {
	c := g.c
	if !g.learnedAllLocked(trainer) {
		return c.cfg.Guard.RaiseAfter
	}
	return min(c.cfg.Guard.ExploreAfter, c.cfg.Guard.RaiseAfter)
}

// learnedAllLocked reports whether the guard has learned trainer's
// response beside every service, under MPS. c.mu is held.
func (g *guard) learnedAllLocked(trainer predictor.ProfileKey) bool {
	c := g.c
	if c.cfg.Mode != predictor.ModeMPS || len(c.cfg.Services) == 0 {
		return false
	}
	for _, svc := range c.cfg.Services {
		if !g.learned.hasTrainer(svc.Name, trainer) {
			return false
		}
	}
	return true
}

// raised is a lease's last raise: to what, and when.
type raised struct {
	to   int
	at   time.Time
	load float64
}

// raiseCap bounds the raises a lease is offered after a raise failed (a
// lease whose trainer's response is learned has none: what the failed
// raise measured bounds it, guard_response.go): below
// below, until until; failed holds the times of its failed raises in the
// last hour.
type raiseCap struct {
	below  int
	until  time.Time
	failed []time.Time
}

// raised records a raise of lease id to pct at now, at the load the guard
// plans on (holds.load).
func (h *holds) raised(id string, to int, now time.Time) {
	if h.raisedTo == nil {
		h.raisedTo = map[string]raised{}
	}
	h.raisedTo[id] = raised{to: to, at: now, load: h.load}
}

// raiseCap is the cap on lease id's raises at now, if one holds: less
// than below.
func (h *holds) raiseCap(id string, now time.Time) (below int, ok bool) {
	rc, ok := h.raiseCaps[id]
	if !ok || !now.Before(rc.until) {
		return 0, false
	}
	return rc.below, true
}

// lowerAfterRaise notes that the guard lowers lease id to pct at
// now. If that comes within Guard.RaiseAfter of a raise to more than pct,
// the raise failed: the server could not take that percentage, whatever
// the prediction said (an observed correction measured at the lower
// percentage may understate the slowdown at the higher one), and the
// lease is offered only less than it for RaiseAfter, doubled for each
// further failed raise of the lease in the last hour (at most
// Guard.MaxHold, or RaiseAfter when that is longer), as the hold after a
// revoke is (readmitAt); unless the load the guard plans on has risen by more than
// Guard.RaiseFailLoad since the raise (the load broke the margin, not the
// percentage). Without this, the guard raises, measures, lowers and
// raises again every few minutes, each time over the limit for a while.
func (h *holds) lowerAfterRaise(g GuardSettings, id string, pct int, now time.Time) {
	r, ok := h.raisedTo[id]
	if !ok {
		return
	}
	delete(h.raisedTo, id)
	if now.Sub(r.at) > g.RaiseAfter || pct >= r.to {
		return
	}
	if g.RaiseFailLoad > 0 && r.load > 0 && h.load > r.load*(1+g.RaiseFailLoad) {
		return // the load rose past what the raise was planned on: no failed raise
	}
	if h.raiseCaps == nil {
		h.raiseCaps = map[string]raiseCap{}
	}
	rc := h.raiseCaps[id]
	rc.failed = append(slices.DeleteFunc(rc.failed, func(t time.Time) bool { return !t.After(now.Add(-time.Hour)) }), now)
	rc.below = r.to
	rc.until = now.Add(g.hold(len(rc.failed)))
	h.raiseCaps[id] = rc
}
