package admission

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// hotFields are the Config fields Reconfigure changes on a running
// controller, and the only ones: the services and the file's admission
// section whole (Settings). The others keep the value New was given until a
// restart (TestHotFieldsAreWhatReconfigureChanges).
var hotFields = []string{"Services", "Settings"}

// HotFields returns the names of the Config fields Reconfigure applies
// without a restart.
func HotFields() []string { return slices.Clone(hotFields) }

// Reconfigured says what a Reconfigure did.
type Reconfigured struct {
	// Changed are the hot fields whose values changed, in Config's order:
	// "Services", and each setting by its path below Config
	// ("Headroom", "Lease.Max").
	Changed []string
	// NeedRestart are the other fields cfg changed: they keep their old
	// values until the sidecar restarts.
	NeedRestart []string
	// Events are the throttle and revoke events of the re-plan.
	Events []Event
}

// Reconfigure applies cfg's hot fields (HotFields) at once and re-plans the
// live leases against them, as an SLO change does: a lease that no longer
// fits is throttled or revoked with its event (see UpdateServices for how).
// A decision that predicted on the old config does not commit. What a
// lower max_jobs, a larger memory reserve or a shorter lease.max changes is
// what is admitted or renewed next: no live lease is revoked for them.
//
// cfg is checked whole (after defaults) first; an invalid one returns
// ErrInvalid and changes nothing. A failed re-plan keeps the new config but
// changes no lease.
func (c *Controller) Reconfigure(ctx context.Context, cfg Config) (Reconfigured, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return Reconfigured{}, fmt.Errorf("reconfigure: %w", err)
	}
	cfg.Services = slices.Clone(cfg.Services)
	var r Reconfigured
	c.mu.Lock()
	cur, next := reflect.ValueOf(&c.cfg).Elem(), reflect.ValueOf(cfg)
	for i := range cur.NumField() {
		name := cur.Type().Field(i).Name
		if reflect.DeepEqual(cur.Field(i).Interface(), next.Field(i).Interface()) {
			continue
		}
		if !slices.Contains(hotFields, name) {
			r.NeedRestart = append(r.NeedRestart, name)
			continue
		}
		if name == "Settings" {
			r.Changed = append(r.Changed, changedLeaves(cur.Field(i), next.Field(i), "")...)
		} else {
			r.Changed = append(r.Changed, name)
		}
		// One field at a time: readers of the fields that do not change
		// (Mode, PipeDir) go on without the lock.
		cur.Field(i).Set(next.Field(i))
	}
	if len(r.Changed) > 0 {
		c.freedLocked()
	}
	c.mu.Unlock()
	if len(r.Changed) == 0 {
		return r, nil
	}
	events, err := c.replanLive(ctx, "after a configuration change")
	r.Events = events
	if err != nil {
		return r, fmt.Errorf("reconfigure: %w", err)
	}
	return r, nil
}

// changedLeaves lists the paths of the fields below a and b (structs of
// one type) whose values differ, prefix first.
func changedLeaves(a, b reflect.Value, prefix string) []string {
	var out []string
	for i := range a.NumField() {
		path := prefix + a.Type().Field(i).Name
		switch {
		case reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()):
		case a.Field(i).Kind() == reflect.Struct:
			out = append(out, changedLeaves(a.Field(i), b.Field(i), path+".")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

// Config returns the configuration in effect (after defaults and the
// last Reconfigure).
func (c *Controller) Config() Config { return c.config() }

// config returns a copy of the controller's config.
func (c *Controller) config() Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.cfg
	cfg.Services = slices.Clone(cfg.Services)
	return cfg
}

// replanLive re-evaluates the live leases against the config in effect and
// applies the plan, publishing its events (see UpdateServices); why opens
// their reasons ("after a configuration change").
func (c *Controller) replanLive(ctx context.Context, why string) ([]Event, error) {
	return c.replanLiveHeld(ctx, why, false)
}

// replanLiveHeld is replanLive; with hold (the guard's re-plans) a revoke
// the plan makes waits for Guard.RevokeAfter and the revoke budget
// (guard_hold.go), the lease at its min_pct meanwhile.
func (c *Controller) replanLiveHeld(ctx context.Context, why string, hold bool) ([]Event, error) {
	for attempt := 1; ; attempt++ {
		s := c.snapshot()
		p, err := s.pol.replan(ctx, s.live)
		if err != nil {
			return nil, fmt.Errorf("re-evaluate leases: %w", err)
		}
		overSLO := hold && c.g.observedOverSLO(s.pol.cfg.Services)
		c.mu.Lock()
		now := c.now()
		if !c.unchangedLocked(s, now) && attempt < maxAttempts {
			c.mu.Unlock()
			continue
		}
		if hold {
			p = c.g.holds.holdRevokes(c.cfg.Guard, s.live, p, now, overSLO)
		}
		throttle := why
		if p.note != "" {
			throttle += " (" + p.note + ")"
		}
		events, serr := c.applyPlan(ctx, s.live, p, now, planWhy{
			throttle: throttle, revoke: why + ", the leases do not fit even with every job at its min_pct; the jobs of lowest priority, newest first, must stop",
			deadline: now.Add(c.cfg.Guard.Deadline)})
		c.mu.Unlock()
		c.signal()
		perr := c.publish(ctx, events)
		return events, errors.Join(serr, perr)
	}
}
