package admission

import (
	"math"
	"time"
)

// A re-plan of the guard that finds no room for a lease even at its
// min_pct does not revoke it at once: bursts are short, and a revoke costs
// the job its slot. The lease is throttled to its min_pct instead, and
// revoked only when a re-plan still finds no room Guard.RevokeAfter after
// the first that found none, and the guard has revoked fewer than
// Guard.MaxRevokesPerHour leases in the last hour, or a service's observed
// p99 is over its SLO (the SLO is being broken: the budget does not hold
// the revoke back). Guard re-plans when a hold ends even if the load has
// not moved since.

// holdRevokesLocked returns p with each revoke it makes held back, as
// above, and records the revokes it lets through. c.mu is held.
func (c *Controller) holdRevokesLocked(live []liveLease, p plan, now time.Time, overSLO bool) plan {
	hour := now.Add(-time.Hour)
	kept := c.revokes[:0]
	for _, t := range c.revokes {
		if t.After(hour) {
			kept = append(kept, t)
		}
	}
	c.revokes = kept
	if c.noRoom == nil {
		c.noRoom = map[string]time.Time{}
	}
	planned := map[string]bool{}
	for i, e := range live {
		id := e.lease.ID
		planned[id] = true
		if !p.revoked[i] || e.lease.Revoked {
			delete(c.noRoom, id)
			continue
		}
		since, seen := c.noRoom[id]
		if !seen {
			c.noRoom[id], since = now, now
		}
		if now.Sub(since) >= c.cfg.Guard.RevokeAfter && (len(c.revokes) < c.cfg.Guard.MaxRevokesPerHour || overSLO) {
			c.revokes = append(c.revokes, now)
			delete(c.noRoom, id)
			continue
		}
		p.revoked[i] = false // held: at its min_pct (the plan's lowest) meanwhile
	}
	for id := range c.noRoom {
		if !planned[id] {
			delete(c.noRoom, id) // gone
		}
	}
	return p
}

// revokeDueLocked reports whether a held revoke's time has come, and
// whether the budget allows one more revoke now. c.mu is held.
func (c *Controller) revokeDueLocked(now time.Time) (due, budget bool) {
	for id, since := range c.noRoom {
		if _, live := c.leases[id]; live && now.Sub(since) >= c.cfg.Guard.RevokeAfter {
			due = true
			break
		}
	}
	if !due {
		return false, false
	}
	recent := 0
	for _, t := range c.revokes {
		if t.After(now.Add(-time.Hour)) {
			recent++
		}
	}
	return true, recent < c.cfg.Guard.MaxRevokesPerHour
}

// observedOverSLO reports whether a service's last observed p99 is over
// its SLO. It takes no lock.
func (c *Controller) observedOverSLO(services []ServiceSpec) bool {
	lo, ok := c.deps.Observer.(LatencyObserver)
	if !ok {
		return false
	}
	for _, s := range services {
		if w, ok := lo.ObservedWindow(s.Name, time.Time{}); ok && !math.IsNaN(w.P99MS) && w.P99MS > s.SLOP99MS {
			return true
		}
	}
	return false
}

// readmitAtLocked is when a new job may be co-located again after the
// guard's revokes of the last hour: a revoke is the guard finding no room
// for a job at any percentage, and a new job is a raise from nothing, so
// it waits as long as a raise would (Guard.RaiseAfter) after the last
// revoke, doubled for each further revoke in the hour, so that a load
// that keeps coming back does not revoke job after job; never more than
// an hour (or RaiseAfter, when that is longer), the span the revokes are
// counted over. Zero when the guard revoked nothing in the last hour.
// c.mu is held.
func (c *Controller) readmitAtLocked(now time.Time) time.Time {
	var last time.Time
	n := 0
	for _, t := range c.revokes {
		if t.After(now.Add(-time.Hour)) {
			n++
			last = t
		}
	}
	if n == 0 {
		return time.Time{}
	}
	return last.Add(c.holdLocked(n))
}

// holdLocked is how long the guard holds back after the n-th revoke (or
// failed raise) in an hour: Guard.RaiseAfter, doubled for each one after
// the first, at most an hour (or RaiseAfter, when that is longer). c.mu
// is held.
func (c *Controller) holdLocked(n int) time.Duration {
	return min(c.cfg.Guard.RaiseAfter<<min(n-1, 6), max(time.Hour, c.cfg.Guard.RaiseAfter))
}
