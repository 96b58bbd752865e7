package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/colocd/colocd/predictor"
)

// UpdateServices swaps in new services and headroom (an SLO reload; the
// rest of the config stays) and re-evaluates the live leases against them.
// When the lease set no longer fits, the rule is simple and conservative:
// leases are taken in victimOrder (lowest job priority first, then last in
// first out), and
//
//  1. MPS only: lease by lease in that order, lower its percentage to the
//     largest on its grid [its min_pct, its current pct] at which the whole
//     set fits, the leases not yet taken at their current percentages and
//     those taken before at their min_pct; if one fits, stop, else leave it
//     at its min_pct and go on to the next lease.
//  2. If the set still does not fit with every lease at its min_pct, revoke
//     leases in the same order until the rest fits.
//
// A lowered lease gets a throttle event (its new Pct, and Deadline = now +
// ThrottleGrace: the launcher restarts its workers at Pct before then); a
// revoked one a revoke event, and it expires at that deadline and cannot be
// renewed. The leases are updated in the store at once, so new admissions
// are predicted as if the launchers had already complied. Past the
// deadline the expiry loop enforces (expiry.go): it revokes a throttled
// lease whose launcher registered no restarted workers, and evicts.
//
// It returns the events it published. Invalid services or headroom return
// ErrInvalid and change nothing; a failed prediction keeps the new services
// but changes no lease. It is Reconfigure with only the services and the
// headroom changed.
//
// The new config takes effect at once (a decision that predicted on the old
// one does not commit). The re-evaluation predicts on a snapshot without
// the lock and applies under it if the leases did not change meanwhile, else
// plans again on a fresh snapshot; after maxAttempts it applies the last
// plan to the leases it planned for that are still live. That is safe: a
// lease granted meanwhile was decided on the new services with the planned
// leases at their old, higher percentages, and a lease gone only frees
// capacity.
func (c *Controller) UpdateServices(ctx context.Context, services []ServiceSpec, headroom float64) ([]Event, error) {
	var f fields
	checkServices(&f, services)
	if !(headroom >= 0 && headroom < 1) {
		f.add("headroom", "a fraction in [0, 1)", fmt.Sprint(headroom))
	}
	if err := f.err("services"); err != nil {
		return nil, err
	}
	cfg := c.config()
	cfg.Services, cfg.Headroom = services, headroom
	r, err := c.Reconfigure(ctx, cfg)
	if err != nil {
		return r.Events, fmt.Errorf("update services: %w", err)
	}
	return r.Events, nil
}

// planWhy is what a plan's events say and when they are due: throttle
// opens a throttle's reason, revoke is a revoke's.
type planWhy struct {
	// op names the store writes in errors (default "update services").
	op               string
	throttle, revoke string
	deadline         time.Time
	// force revokes leases already revoked again, when deadline is
	// earlier than theirs (a fault).
	force bool
}

// applyPlan stores the changed leases and returns their events; planned
// holds the leases the plan was made for, applied by id to those still
// live. A lease the store refuses keeps its old state and gets no event.
// c.mu is held, and released while a lease's record is written.
func (c *Controller) applyPlan(ctx context.Context, planned []liveLease, p plan, now time.Time, why planWhy) ([]Event, error) {
	pcts, revoked := p.pcts, p.revoked
	deadline := why.deadline
	var events []Event
	var errs []error
	for i := range planned {
		e, ok := c.leases[planned[i].lease.ID]
		if ok && e.writing { // another change of the lease is being stored: apply on top of it
			c.waitWrittenLocked(e)
			now = c.now()
			e, ok = c.leases[planned[i].lease.ID]
		}
		if !ok || !e.liveAt(now) {
			continue
		}
		l := e.lease.clone()
		ev := Event{LeaseID: l.ID, JobID: l.JobID, Deadline: deadline, Time: now}
		switch {
		case revoked[i] && (!l.Revoked || why.force && l.ExpiresAt.After(deadline)):
			l.Revoked, l.Deadline = true, deadline
			if deadline.Before(l.ExpiresAt) {
				l.ExpiresAt = deadline
			}
			ev.Type, ev.Pct = EventRevoke, l.Pct
			ev.Reason = why.revoke
		case !revoked[i] && pcts[i] < l.Pct && pcts[i] >= l.running():
			// A raise the launcher did not take: its workers already run
			// at or below the new percentage, and need no restart.
			ev.Type, ev.Pct, ev.Deadline = EventThrottle, pcts[i], time.Time{}
			ev.Reason = fmt.Sprintf("%s, the job may run at %d %% at most instead of %d %%; its workers run at %d %% and need no restart", why.throttle, pcts[i], l.Pct, l.running())
			l.Pct = pcts[i]
			ev.Env = c.Env(l)
		case !revoked[i] && pcts[i] < l.Pct:
			ev.Type, ev.Pct = EventThrottle, pcts[i]
			ev.Reason = fmt.Sprintf("%s, the job must run at %d %% instead of %d %%: restart its workers with %s=%d and register them", why.throttle, pcts[i], l.Pct, EnvActiveThreads, pcts[i])
			l.Pct, l.Deadline, l.ThrottledAt = pcts[i], deadline, now
			ev.Env = c.Env(l)
		default:
			continue
		}
		delete(c.g.raiseRoom, l.ID)
		if ev.Type == EventThrottle {
			c.g.holds.lowerAfterRaise(c.cfg.Guard, l.ID, l.Pct, now)
		}
		if err := c.update(ctx, cmp.Or(why.op, "update services"), e, l); err != nil {
			errs = append(errs, err)
			continue
		}
		c.freedLocked()
		c.movedLocked()
		events = append(events, ev)
	}
	return events, errors.Join(errs...)
}

// Health is one component's state.
type Health struct {
	OK     bool
	Reason string
}

// Status is what the status endpoint reports.
type Status struct {
	Mode predictor.Mode
	GPU  Health
	// Daemon is the MPS daemon's health (OK, "not used", in time-slicing mode).
	Daemon Health
	// Services are the predictions with the live leases as they run now.
	Services []ServicePrediction
	Leases   []Lease
}

// Status reports health, the live leases and each service's predicted p99
// with them. It predicts on a snapshot, without the lock, within ctx's
// deadline capped by Config.DecisionTimeout. On a prediction error it
// returns the rest with the error.
func (c *Controller) Status(ctx context.Context) (Status, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	s := c.snapshot()
	fc := s.pol
	st := Status{Mode: fc.cfg.Mode, Daemon: Health{OK: true, Reason: "not used"}}
	st.GPU.OK, st.GPU.Reason = fc.device.Healthy()
	if fc.cfg.Mode == predictor.ModeMPS {
		st.Daemon.OK, st.Daemon.Reason = fc.daemon.Healthy()
	}
	for _, e := range append(slices.Clone(s.live), s.lent...) {
		st.Leases = append(st.Leases, e.lease.public())
	}
	preds, _, err := fc.predictAll(ctx, trainersOf(s.live))
	if err != nil {
		if cerr := ctxErr("status", ctx); cerr != nil {
			return st, cerr
		}
		return st, fmt.Errorf("status: %w", err)
	}
	st.Services = preds
	return st, nil
}
