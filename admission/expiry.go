package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Run expires leases as their time comes: it removes each from the store,
// frees its capacity and publishes an expire event. It returns nil when ctx
// is done. Run it once, after Restore.
func (c *Controller) Run(ctx context.Context) error {
	for {
		c.mu.Lock()
		now := c.clock.Now()
		events := c.expireLocked(ctx, now)
		next, ok := c.nextExpiryLocked()
		c.mu.Unlock()
		_ = c.publish(ctx, events) // logged; the leases are gone either way

		var timer <-chan time.Time
		if ok {
			timer = c.clock.After(next.Sub(now))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timer:
		case <-c.wake:
		}
	}
}

// expireLocked removes every lease whose time has come and returns its
// expire event. A store that fails to delete is logged, not retried: the
// capacity is freed all the same, and Restore expires what was left behind.
func (c *Controller) expireLocked(ctx context.Context, now time.Time) []Event {
	var events []Event
	for _, e := range c.leases {
		l := &e.lease
		if now.Before(l.ExpiresAt) {
			continue
		}
		if err := c.deps.Store.Delete(ctx, l); err != nil && !errors.Is(err, ErrNotFound) {
			c.log.Warn("delete expired lease", "lease", l.ID, "err", err)
		}
		reason := "the lease was not renewed before it expired"
		if l.Revoked {
			reason = "the revoked lease reached its deadline"
		}
		events = append(events, Event{Type: EventExpire, LeaseID: l.ID, JobID: l.JobID, Pct: l.Pct, Reason: reason, Time: now})
		c.forget(l)
	}
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.LeaseID, b.LeaseID) })
	return events
}

// nextExpiryLocked returns the earliest expiry among the leases.
func (c *Controller) nextExpiryLocked() (time.Time, bool) {
	var next time.Time
	for _, e := range c.leases {
		if next.IsZero() || e.lease.ExpiresAt.Before(next) {
			next = e.lease.ExpiresAt
		}
	}
	return next, !next.IsZero()
}

// publish sends events, logging failures (the owner of the loop logs).
func (c *Controller) publish(ctx context.Context, events []Event) error {
	var errs []error
	for _, ev := range events {
		if err := c.deps.Events.Publish(ctx, ev); err != nil {
			c.log.Warn("publish lease event", "type", ev.Type, "lease", ev.LeaseID, "err", err)
			errs = append(errs, fmt.Errorf("publish %s event of lease %s: %w", ev.Type, ev.LeaseID, err))
		}
	}
	return errors.Join(errs...)
}

// Restore replaces the controller's leases by the store's, so a restarted
// sidecar loses none. Leases already expired are deleted and get their
// expire event now. A stored lease that cannot be used (no id, no valid
// training profile, a percentage out of range) fails the whole restore and
// nothing is loaded: silently dropping a lease would hide a job that runs.
func (c *Controller) Restore(ctx context.Context) error {
	stored, err := c.deps.Store.Load(ctx)
	if err != nil {
		return fmt.Errorf("restore leases: %w", err)
	}
	var bad []string
	keys := make([]ProfileKey, len(stored))
	for i, l := range stored {
		if why := checkStored(l); why != "" {
			id := ""
			if l != nil {
				id = l.ID
			}
			bad = append(bad, fmt.Sprintf("lease %q: %s", id, why))
			continue
		}
		keys[i] = KeyOf(l.Profile)
	}
	if len(bad) > 0 {
		return fmt.Errorf("restore leases: %w: %s", ErrInvalid, strings.Join(bad, "; "))
	}
	c.mu.Lock()
	c.leases = map[string]*entry{}
	c.byRequest = map[[32]byte]string{}
	for i, l := range stored {
		c.leases[l.ID] = &entry{lease: l.clone(), key: keys[i]}
		c.byRequest[l.RequestHash] = l.ID
	}
	events := c.expireLocked(ctx, c.clock.Now())
	c.mu.Unlock()
	c.signal()
	return c.publish(ctx, events)
}

// checkStored says what makes a stored lease unusable, or "".
func checkStored(l *Lease) string {
	switch {
	case l == nil:
		return "empty record"
	case l.ID == "":
		return "no id"
	case l.Profile == nil || l.Profile.Kind != predictor.KindTraining:
		return "no training profile"
	case l.Pct < 1 || l.Pct > 100:
		return fmt.Sprintf("percentage %d out of [1, 100]", l.Pct)
	}
	if err := l.Profile.Validate(); err != nil {
		return err.Error()
	}
	return ""
}
