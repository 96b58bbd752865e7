package admission

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Decisions never predict under c.mu: a cold prediction takes from
// milliseconds to seconds, and renew, release, register and expiry must not
// wait for it. As nomad's plan/apply does, a decision is made in two steps
// (docs/admission.md):
//
//  1. evaluate: under the lock copy what a decision relies on (a snapshot:
//     the config and the live leases, at the controller's generation), then
//     without the lock check health, max_jobs and memory and predict;
//  2. commit: under the lock again, grant only if the generation is the
//     snapshot's and the same leases are live; otherwise evaluate again on
//     a fresh snapshot, at most admitAttempts times in all. A deny also
//     stands when, since the snapshot, capacity was only taken (grants,
//     nothing freed): with more leases the job fits less.
//
// The generation counts every change to what a prediction or a constraint
// reads: a lease granted, released, expired, throttled or revoked, and a
// config change (Reconfigure). Renew and register do not move it: an
// expiry or PIDs change neither the trainers nor the job count, and PIDs
// only make memory that was counted as not yet visible count through NVML.
// Leases also leave the live set by time alone, before Run forgets them, so
// the commit compares the live lease ids too.

// maxAttempts bounds the re-plans of an SLO change, and is the least
// number of evaluations of one admit (admitAttempts).
const maxAttempts = 3

// admitAttempts bounds the evaluations of one admit whose snapshot keeps
// going stale (the lease set or the config changed while it predicted);
// after the last one the admit is a 503 with CodeBusy. While nothing frees
// capacity, each stale evaluation was overtaken by a grant, and after
// max_jobs grants the next evaluation is a deny, which stands: max_jobs + 1
// evaluations always end in a decision then. Grants of whole MIG
// instances, which max_jobs does not count, may overtake it too, at most
// one per instance (a GPU has at most maxInstances). Only churn (leases
// released, expired or throttled, SLO reloads) can end one in busy.
// c.mu is held.
func (c *Controller) admitAttemptsLocked() int {
	n := c.cfg.MaxJobs + 1
	if c.deps.Instances != nil {
		n += maxInstances
	}
	return max(maxAttempts, n)
}

// maxInstances is the most GPU instances a MIG GPU has.
const maxInstances = 7

// ErrTimeout: the request's deadline (the caller's, or
// Config.DecisionTimeout, whichever comes first) passed before the decision
// was made (504). Nothing was granted or remembered: a retry with the same
// request_id decides afresh.
var ErrTimeout = errors.New("decision deadline exceeded")

// snapshot is what one evaluation relies on, copied under c.mu: the
// leases the policy decides on (view), the policy at the config of the
// moment, and the generation a commit checks.
type snapshot struct {
	gen   uint64
	freed uint64
	view
	// pol is the policy at the snapshot's config (policyLocked): the
	// evaluation runs on it, never on the live controller.
	pol *policy
}

// snapshotLocked copies the config and the live leases. c.mu is held.
func (c *Controller) snapshotLocked() *snapshot {
	now := c.now()
	s := &snapshot{gen: c.gen, freed: c.freed, view: view{now: now, live: []liveLease{}, readmitAt: c.g.holds.readmitAt(c.cfg.Guard, now), rivals: c.rivals.names(now, c.cfg.Lease.Max), drain: c.drain}, pol: c.policyLocked()}
	for _, e := range c.liveLocked(now) {
		cp := e.copy()
		if below, ok := c.g.holds.raiseCap(e.lease.ID, now); ok && !c.g.learnedAllLocked(cp.key) {
			cp.raiseBelow = below
		}
		if e.lease.Instance != nil {
			s.lent = append(s.lent, cp)
		} else {
			s.live = append(s.live, cp)
		}
	}
	return s
}

// snapshot is snapshotLocked for a caller without the lock.
func (c *Controller) snapshot() *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

// policyLocked returns the policy at a copy of c's config, with each
// service at its observed load and correction (guard_observed.go). Reconfigure
// changes c.cfg under c.mu; the policy reads its own copy without the lock.
// c.mu is held.
func (c *Controller) policyLocked() *policy {
	cfg := c.cfg
	cfg.Services = c.g.observedServices(cfg.Services)
	pol := newPolicy(cfg, c.deps, c.log)
	if len(c.g.learned) > 0 {
		pol.learned, pol.stale = c.g.learned.clone(), c.now().Add(-c.cfg.Guard.ResponseTTL)
	}
	return pol
}

// unchangedLocked reports whether the config and the live leases at now are
// still those of s. c.mu is held.
func (c *Controller) unchangedLocked(s *snapshot, now time.Time) bool {
	if c.gen != s.gen {
		return false
	}
	live := c.colocatedLocked(now)
	if len(live) != len(s.live) {
		return false
	}
	for i, e := range live {
		if e.lease.ID != s.live[i].lease.ID {
			return false
		}
	}
	return true
}

// changedLocked records a change to the lease set that takes capacity (a
// grant). c.mu is held.
func (c *Controller) changedLocked() { c.gen++; c.movedLocked() }

// movedLocked records that what runs on the GPU changed. c.mu is held.
func (c *Controller) movedLocked() { c.g.movedAt = c.now() }

// freedLocked records a change that may free capacity: a lease gone,
// throttled or revoked, or a config change. c.mu is held.
func (c *Controller) freedLocked() { c.gen++; c.freed++ }

// onlyTakenLocked reports whether, since s, capacity was only taken: no
// change freed any, and every lease live in s still is. A deny decided on
// s then stands, since more leases only make a job fit less (as a serial
// order with the deny after the grants would decide). c.mu is held.
func (c *Controller) onlyTakenLocked(s *snapshot, now time.Time) bool {
	if c.freed != s.freed {
		return false
	}
	for i := range s.live {
		e, ok := c.leases[s.live[i].lease.ID]
		if !ok || !c.countsLocked(e, now) {
			return false
		}
	}
	return true
}

// withDeadline bounds ctx by Config.DecisionTimeout (the caller's own
// deadline wins when it is earlier). c.mu is not held.
func (c *Controller) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	c.mu.Lock()
	d := c.cfg.DecisionTimeout
	c.mu.Unlock()
	return context.WithTimeout(ctx, d)
}

// ctxErr returns nil while ctx is live; once it is done, ErrTimeout for a
// deadline and the context's error otherwise (the caller went away).
func ctxErr(op string, ctx context.Context) error {
	err := ctx.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: no decision before the caller's deadline or admission.decision_timeout; nothing was granted",
			op, ErrTimeout)
	}
	return fmt.Errorf("%s: %w", op, err)
}
