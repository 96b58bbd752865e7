package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// guard is what keeps watching the leases once they are granted: what it
// measured of the servers and learned of their response, what it last
// planned at, and its holds on raises and revokes. Its steps (run, measure,
// revokeBroken, raise, the fault revokes) act on the Controller's leases
// through the Controller, which owns one guard; every field is guarded by
// the Controller's mu.
type guard struct {
	c *Controller
	// planned is what the last re-plan assumed of the services: each one's
	// rate and correction, and the learned response's generation.
	planned []float64
	// corrections are the services' observed corrections, measured the
	// last measurement of each (guard_latency.go).
	corrections map[string]float64
	measured    map[string]Measurement
	// coMeasured: the services whose latency has been measured next to a
	// training job (guard_latency.go).
	coMeasured map[string]bool
	// learned is the learned response (guard_response.go), and learnedGen moves
	// whenever a learned ratio changes band.
	learned    learned
	learnedGen int
	// movedAt is when what runs on the GPU last changed: a lease granted,
	// gone, re-planned or with new processes. An observed window that began
	// before it saw another lease set.
	movedAt time.Time
	// raiseRoom holds, per lease id, since when every raise check found
	// room to raise it (a check that finds none, or a plan that lowers it,
	// drops it); raiseAt is when the next check is due (guard_raise.go).
	raiseRoom map[string]time.Time
	raiseAt   time.Time
	// holds are the held revokes, the revokes of the last hour and the
	// failed raises (guard_hold.go).
	holds holds
}

// Guard revokes every lease, with a deadline of now, while the GPU or its
// MPS server is in a fault (Deps.Faults): the expiry loop then evicts the
// jobs at once, and admission answers 503 until the fault clears; the
// inference server is never touched.
//
// Otherwise Guard first measures the prediction against each service's
// observed p99 (guard_latency.go), revokes a lease at once where the observed
// p99 is over the SLO with every lease at its min_pct (guard_broken.go), then
// re-plans the live leases when a
// service's observed load has moved to another band or its correction
// changed since the last plan (guard_observed.go): more load, or a server slower
// than predicted, lowers leases (throttle events with a deadline) or
// revokes them, lowest priority and newest first, by the rule of
// UpdateServices; less changes nothing at once. When nothing moved, Guard
// looks whether a lowered lease may be raised again (guard_raise.go): only once
// the margin has held for Config.RaiseAfter. Call it often (each second):
// when nothing moved it only looks up cached predictions.
//
// A lease that holds a MIG instance whole meets none of this: Guard revokes
// it, due now, only when its own instance reports a fault (Instance.Fault).
func (c *Controller) Guard(ctx context.Context) ([]Event, error) {
	lent, lerr := c.g.revokeLentFaults(ctx)
	events, err := c.g.run(ctx)
	return append(lent, events...), errors.Join(lerr, err)
}

// run is Guard for the co-located leases.
func (g *guard) run(ctx context.Context) ([]Event, error) {
	c := g.c
	if c.deps.Faults != nil {
		if bad, why := c.deps.Faults.Fault(); bad {
			return g.revokeAll(ctx, why)
		}
	}
	measured, err := g.measure(ctx)
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	if events, err := g.revokeBroken(ctx); len(events) > 0 || err != nil {
		return events, err
	}
	c.mu.Lock()
	planned := g.observedServices(c.cfg.Services)
	g.holds.load = 0
	for _, s := range planned {
		g.holds.load += s.RateRPS
	}
	key := append(guardKey(planned), float64(g.learnedGen))
	same := slices.Equal(key, g.planned)
	due, budget := g.holds.revokeDue(c.cfg.Guard, c.now(), func(id string) bool { _, ok := c.leases[id]; return ok })
	services := c.cfg.Services
	c.mu.Unlock()
	// A held revoke whose time has come re-plans only when it may go
	// through: past the budget, only while the SLO is being broken, not
	// every second for nothing.
	held := due && (budget || g.observedOverSLO(services))
	if same && !held {
		return g.raise(ctx)
	}
	why := "as the inference server's observed load rose"
	switch {
	case measured:
		why = "as the inference server's own p99 showed the prediction to be low"
	case same:
		why = fmt.Sprintf("as the inference server's observed load stayed too high for %s", c.cfg.Guard.RevokeAfter)
	}
	events, err := c.replanLiveHeld(ctx, why, true)
	if err != nil {
		return events, err
	}
	c.mu.Lock()
	g.planned = key
	c.mu.Unlock()
	if len(events) > 0 {
		c.log.Info("observed load or latency moved: leases re-planned", "events", len(events))
	}
	return events, nil
}

// guardKey is what a plan assumed of the services: each one's rate and
// correction.
func guardKey(services []ServiceSpec) []float64 {
	out := make([]float64, 0, 2*len(services))
	for _, s := range services {
		out = append(out, s.RateRPS, s.correction())
	}
	return out
}

// revokeAll revokes every live lease, due now, for a fault: also those
// revoked before with a later deadline.
func (g *guard) revokeAll(ctx context.Context, fault string) ([]Event, error) {
	c := g.c
	c.mu.Lock()
	now := c.now()
	var planned []liveLease
	for _, e := range c.colocatedLocked(now) { // a lent instance has faults of its own (lent)
		if !e.lease.Revoked || e.lease.ExpiresAt.After(now) {
			planned = append(planned, e.copy())
		}
	}
	if len(planned) == 0 {
		c.mu.Unlock()
		return nil, nil
	}
	revoked := make([]bool, len(planned))
	pcts := make([]int, len(planned))
	for i := range planned {
		revoked[i], pcts[i] = true, planned[i].lease.Pct
	}
	reason := "the GPU or its MPS server failed (" + fault + "): every training job on it must stop now"
	events, serr := c.applyPlan(ctx, planned, plan{pcts: pcts, revoked: revoked}, now, planWhy{revoke: reason, deadline: now, force: true})
	c.mu.Unlock()
	c.signal()
	perr := c.publish(ctx, events)
	if len(events) > 0 {
		c.log.Warn("gpu fault: every lease revoked", "fault", fault, "leases", len(events))
	}
	return events, errors.Join(serr, perr)
}

// revokeLentFaults revokes, due now, every lease whose MIG instance reports
// a fault; the expiry loop then forgets it. The instances are read only
// while some lease holds one; a read that fails revokes nothing (it is no
// fault), and is returned.
func (g *guard) revokeLentFaults(ctx context.Context) ([]Event, error) {
	c := g.c
	if c.deps.Instances == nil {
		return nil, nil
	}
	c.mu.Lock()
	held := slices.ContainsFunc(c.liveLocked(c.now()), func(e *entry) bool { return e.lease.Instance != nil })
	c.mu.Unlock()
	if !held {
		return nil, nil
	}
	insts, err := c.deps.Instances.Lendable(ctx)
	if err != nil {
		return nil, fmt.Errorf("guard: read the lent MIG instances: %w", err)
	}
	faults := map[string]string{}
	for _, in := range insts {
		if in.Fault != "" {
			faults[in.UUID] = in.Fault
		}
	}
	if len(faults) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	now := c.now()
	var events []Event
	var errs []error
	for _, e := range c.liveLocked(now) {
		in := e.lease.Instance
		if in == nil || faults[in.UUID] == "" || e.lease.Revoked && !e.lease.ExpiresAt.After(now) {
			continue
		}
		reason := fmt.Sprintf("MIG instance %s (%s) faulted, %s: the job on it must stop now", in.Profile, in.UUID, faults[in.UUID])
		evs, err := c.applyPlan(ctx, []liveLease{e.copy()}, plan{pcts: []int{e.lease.Pct}, revoked: []bool{true}}, now,
			planWhy{op: "revoke on a faulted instance", revoke: reason, deadline: now, force: true})
		events = append(events, evs...)
		errs = append(errs, err)
	}
	c.mu.Unlock()
	c.signal()
	perr := c.publish(ctx, events)
	if len(events) > 0 {
		c.log.Warn("lent mig instance faulted: its leases revoked", "leases", len(events))
	}
	return events, errors.Join(append(errs, perr)...)
}
