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

// holds is what the guard holds back, and why: revokes it has not let
// through yet, the revokes of the last hour, and raises that failed. It is
// the Controller's, under its mutex; its methods take the guard's settings.
type holds struct {
	// noRoom holds, per lease id, since when the guard has found no room
	// for it even at its min_pct, and revokes the times of the guard's
	// revokes in the last hour.
	noRoom  map[string]time.Time
	revokes []time.Time
	// raisedTo holds, per lease id, its last raise (guard_raise.go); raiseCaps
	// the raises that failed: a lease the guard lowered soon after a raise
	// is not offered that percentage again for a while.
	raisedTo  map[string]raised
	raiseCaps map[string]raiseCap
	// load is the load the guard last planned on: the services' rates,
	// summed (guardShared sets it each check).
	load float64
}

// revoked records a revoke the guard let through at now.
func (h *holds) revoked(now time.Time) { h.revokes = append(h.revokes, now) }

// forget drops what is held of lease id (gone).
func (h *holds) forget(id string) {
	delete(h.raisedTo, id)
	delete(h.raiseCaps, id)
}

// holdRevokes returns p with each revoke it makes held back, as above,
// and records the revokes it lets through.
func (h *holds) holdRevokes(g GuardSettings, live []liveLease, p plan, now time.Time, overSLO bool) plan {
	hour := now.Add(-time.Hour)
	kept := h.revokes[:0]
	for _, t := range h.revokes {
		if t.After(hour) {
			kept = append(kept, t)
		}
	}
	h.revokes = kept
	if h.noRoom == nil {
		h.noRoom = map[string]time.Time{}
	}
	planned := map[string]bool{}
	for i, e := range live {
		id := e.lease.ID
		planned[id] = true
		if !p.revoked[i] || e.lease.Revoked {
			delete(h.noRoom, id)
			continue
		}
		since, seen := h.noRoom[id]
		if !seen {
			h.noRoom[id], since = now, now
		}
		if now.Sub(since) >= g.RevokeAfter && (len(h.revokes) < g.MaxRevokesPerHour || overSLO) {
			h.revoked(now)
			delete(h.noRoom, id)
			continue
		}
		p.revoked[i] = false // held: at its min_pct (the plan's lowest) meanwhile
	}
	for id := range h.noRoom {
		if !planned[id] {
			delete(h.noRoom, id) // gone
		}
	}
	return p
}

// revokeDue reports whether a held revoke of a lease that live says is
// still there has come due, and whether the budget allows one more revoke
// now.
func (h *holds) revokeDue(g GuardSettings, now time.Time, live func(id string) bool) (due, budget bool) {
	for id, since := range h.noRoom {
		if live(id) && now.Sub(since) >= g.RevokeAfter {
			due = true
			break
		}
	}
	if !due {
		return false, false
	}
	recent := 0
	for _, t := range h.revokes {
		if t.After(now.Add(-time.Hour)) {
			recent++
		}
	}
	return true, recent < g.MaxRevokesPerHour
}

// observedOverSLO reports whether a service's last observed p99 is over
// its SLO. It takes no lock.
func (g *guard) observedOverSLO(services []ServiceSpec) bool {
	c := g.c
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
// Guard.MaxHold (or RaiseAfter, when that is longer). Zero when the guard
// revoked nothing in the last hour.
func (h *holds) readmitAt(g GuardSettings, now time.Time) time.Time {
	var last time.Time
	n := 0
	for _, t := range h.revokes {
		if t.After(now.Add(-time.Hour)) {
			n++
			last = t
		}
	}
	if n == 0 {
		return time.Time{}
	}
	return last.Add(g.hold(n))
}

// hold is how long the guard holds back after the n-th revoke (or failed
// raise) in an hour: RaiseAfter, doubled for each one after the first, at
// most MaxHold, or RaiseAfter when that is longer.
func (g GuardSettings) hold(n int) time.Duration {
	return min(g.RaiseAfter<<min(n-1, 6), max(g.MaxHold, g.RaiseAfter))
}
