package admission

import (
	"cmp"
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
// is done. Run it once, after Restore. A controller on a simulated clock
// (Deps.Clock) is not Run: its caller calls Expire as its time moves.
func (c *Controller) Run(ctx context.Context) error {
	for {
		c.Expire(ctx)
		c.mu.Lock()
		now := c.now()
		next, ok := c.nextExpiryLocked()
		c.mu.Unlock()

		var timer <-chan time.Time
		if ok {
			timer = time.After(next.Sub(now))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-timer:
		case <-c.wake:
		}
	}
}

// Expire does what is due now once: the leases whose time is up expire,
// throttled leases not restarted by their deadline are revoked, retired
// processes are evicted. It publishes the events (a failure is logged; the
// leases are gone either way) and returns them.
func (c *Controller) Expire(ctx context.Context) []Event {
	events := c.expire(ctx)
	_ = c.publish(ctx, events)
	return events
}

// evictRetry is how long a lease whose processes could not be evicted
// keeps its capacity before the next try.
const evictRetry = 5 * time.Second

// duty is what the expiry loop must do with a lease now.
type duty int

const (
	dutyNone    duty = iota
	dutyExpire       // its time is up (not renewed, or revoked and at its deadline)
	dutyRevoke       // throttled and not restarted by the deadline
	dutyRetired      // processes a register replaced are due to be gone
)

// dutyAt says what the expiry loop must do with e at now. c.mu is held.
func (e *entry) dutyAt(now time.Time) duty {
	l := &e.lease
	switch {
	case e.writing:
		return dutyNone
	case !now.Before(l.ExpiresAt):
		return dutyExpire
	case !l.Deadline.IsZero() && !now.Before(l.Deadline) && l.awaitingRestart() && !l.Revoked:
		return dutyRevoke
	case len(l.Retired) > 0 && !now.Before(l.retiredDue()):
		return dutyRetired
	}
	return dutyNone
}

// expire acts on every lease whose time has come and returns the events:
// an expired lease's processes are evicted, its record deleted and its
// capacity freed (expire event); a throttled lease whose launcher did not
// register restarted workers by the deadline is revoked the same way
// (revoke, then expire event); a restarted lease's retired processes are
// evicted. Eviction and the store run without the lock (write.go), a lease
// being written waits for the next round. A lease whose processes could
// not all be evicted keeps its record and its capacity, revoked, and is
// tried again after evictRetry: its capacity is freed only once its
// processes are gone. A store that fails to delete is logged, not retried:
// the capacity is freed all the same, and Restore expires what was left.
func (c *Controller) expire(ctx context.Context) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var due []*entry
	for _, e := range c.leases {
		if e.dutyAt(now) != dutyNone {
			due = append(due, e)
		}
	}
	var events []Event
	for _, e := range due {
		// No one else changes a due lease but a renew or register that
		// raced this loop; the duty is read again after any write ended.
		c.waitWrittenLocked(e)
		if c.leases[e.lease.ID] != e {
			continue
		}
		events = append(events, c.dischargeLocked(ctx, e, e.dutyAt(c.now()))...)
	}
	slices.SortStableFunc(events, func(a, b Event) int { return strings.Compare(a.LeaseID, b.LeaseID) })
	return events
}

// dischargeLocked does duty d for e and returns its events. c.mu is held.
func (c *Controller) dischargeLocked(ctx context.Context, e *entry, d duty) []Event {
	now := c.now()
	l := e.lease.clone()
	switch d {
	case dutyRetired:
		var due, rest []Process
		for _, p := range l.Retired {
			if now.Before(p.Due) {
				rest = append(rest, p)
			} else {
				due = append(due, p)
			}
		}
		if err := c.evictLocked(ctx, e, due); err != nil {
			c.log.Warn("evict the replaced processes of a lease; trying again", "lease", l.ID, "retry_in", evictRetry, "err", err)
			for i := range e.lease.Retired {
				if !now.Before(e.lease.Retired[i].Due) {
					e.lease.Retired[i].Due = now.Add(evictRetry) // in memory: the next try
				}
			}
			return nil
		}
		l.Retired = rest
		if err := c.update(ctx, "evict", e, l); err != nil {
			// Evicted all the same: the store keeps them until the next
			// write of the lease, and Restore's eviction finds them gone.
			c.log.Warn("store a lease after evicting its replaced processes", "lease", l.ID, "err", err)
			e.lease.Retired = rest
		}
		return nil
	case dutyExpire, dutyRevoke:
	default:
		return nil
	}
	var events []Event
	reason := "the lease was not renewed before it expired"
	switch {
	case l.Released:
		reason = "the lease was released; its processes still on the GPU were evicted"
	case l.Revoked:
		reason = "the revoked lease reached its deadline"
	}
	if d == dutyRevoke {
		reason = "the throttled job did not register workers restarted at its new percentage before the deadline"
		events = append(events, Event{Type: EventRevoke, LeaseID: l.ID, JobID: l.JobID, Pct: l.Pct, Deadline: now, Reason: reason, Time: now})
	}
	procs := append(l.procs(), l.Retired...)
	if err := c.evictLocked(ctx, e, procs); err != nil {
		c.log.Warn("evict the processes of an ended lease; it keeps its capacity until they are gone", "lease", l.ID, "retry_in", evictRetry, "err", err)
		l.Revoked, l.ExpiresAt, l.Deadline = true, now.Add(evictRetry), now.Add(evictRetry)
		e.lease = l // in memory only: Restore evicts again what the store still holds
		return events
	}
	if err := c.writeLocked(e, func() error { return c.deps.Store.Delete(ctx, &l) }); err != nil && !errors.Is(err, ErrNotFound) {
		c.log.Warn("delete expired lease", "lease", l.ID, "err", err)
	}
	events = append(events, Event{Type: EventExpire, LeaseID: l.ID, JobID: l.JobID, Pct: l.Pct, Reason: reason, Time: now})
	c.forget(&e.lease)
	return events
}

// evictLocked ends procs through the Evictor, with c.mu released and e
// marked as being written (it keeps its capacity meanwhile). c.mu is held.
func (c *Controller) evictLocked(ctx context.Context, e *entry, procs []Process) error {
	if c.deps.Evictor == nil || len(procs) == 0 {
		return nil
	}
	err := c.writeLocked(e, func() error { return c.deps.Evictor.Evict(ctx, procs) })
	if err == nil {
		c.log.Info("evicted the processes of a lease", "lease", e.lease.ID, "job", e.lease.JobID, "processes", len(procs))
	}
	return err
}

// nextExpiryLocked returns the earliest time the loop has a duty, among
// the leases not being written (a write's end wakes the loop).
func (c *Controller) nextExpiryLocked() (time.Time, bool) {
	var next time.Time
	for _, e := range c.leases {
		if e.writing {
			continue
		}
		at := e.lease.ExpiresAt
		if d := e.lease.Deadline; !d.IsZero() && d.Before(at) && e.lease.awaitingRestart() && !e.lease.Revoked {
			at = d
		}
		if d := e.lease.retiredDue(); !d.IsZero() && d.Before(at) {
			at = d
		}
		if next.IsZero() || at.Before(next) {
			next = at
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
// sidecar loses none. The store is not trusted: a record the store could
// not read (ErrUnreadable) or a lease that cannot be used (checkStored) is
// logged and skipped, never a failed start; times are clamped (expires_at
// to lease.max from now); leases already expired are deleted and get their
// expire event now; and the rest are re-checked against the SLOs, as an SLO
// reload does, so a stored percentage that does not fit is throttled or
// revoked with its event.
func (c *Controller) Restore(ctx context.Context) error {
	stored, err := c.deps.Store.Load(ctx)
	if err != nil && !errors.Is(err, ErrUnreadable) {
		return fmt.Errorf("restore leases: %w", err)
	}
	if err != nil {
		c.log.Warn("restore leases: skipping records that cannot be read", "err", err)
	}
	now := c.now()
	c.mu.Lock()
	leaseMax, leaseDefault := c.cfg.Lease.Max, c.cfg.Lease.Default
	c.mu.Unlock()
	leases := map[string]*entry{}
	byRequest := map[[32]byte]string{}
	// Oldest first: of two records that hold one MIG instance, the older
	// keeps it.
	slices.SortStableFunc(stored, func(a, b *Lease) int {
		if a == nil || b == nil {
			return cmp.Compare(boolInt(a == nil), boolInt(b == nil))
		}
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	lent := c.restoreInstances(ctx)
	for _, l := range stored {
		if why := checkStored(l); why != "" {
			id := ""
			if l != nil {
				id = truncate(l.ID)
			}
			c.log.Warn("restore leases: skipping a lease that cannot be used", "lease", id, "why", why)
			continue
		}
		if _, dup := leases[l.ID]; dup {
			c.log.Warn("restore leases: skipping a second lease with the same id", "lease", l.ID)
			continue
		}
		if l.Instance != nil {
			if why := lent.check(l, c.cfg.VisibleDevice); why != "" {
				c.log.Warn("restore leases: skipping a lease that cannot hold its MIG instance", "lease", l.ID, "why", why)
				continue
			}
		}
		clamped := clampStored(l.clone(), now, leaseMax, leaseDefault)
		leases[l.ID] = &entry{liveLease: liveLease{lease: clamped, key: l.Profile.Key()}}
		if l.RequestHash != ([32]byte{}) {
			byRequest[l.RequestHash] = l.ID
		}
	}
	c.mu.Lock()
	c.leases, c.byRequest = leases, byRequest
	c.freedLocked()
	c.mu.Unlock()
	events := c.expire(ctx)
	c.mu.Lock()
	live := len(c.liveLocked(c.now()))
	c.mu.Unlock()
	c.signal()
	perr := c.publish(ctx, events)
	if live > 0 {
		if _, err := c.replanLive(ctx, "after a restart"); err != nil {
			c.log.Warn("restore leases: re-checking them against the SLOs failed; they stay as stored", "err", err)
		}
	}
	return perr
}

// clampStored bounds a stored lease's times by what this sidecar grants:
// created no later than now, a duration in (0, leaseMax], and an expiry and
// deadline at most leaseMax from now.
func clampStored(l Lease, now time.Time, leaseMax, leaseDefault time.Duration) Lease {
	if l.CreatedAt.After(now) {
		l.CreatedAt = now
	}
	if l.Duration <= 0 {
		l.Duration = min(leaseDefault, leaseMax)
	}
	l.Duration = min(l.Duration, leaseMax)
	if limit := now.Add(leaseMax); l.ExpiresAt.After(limit) {
		l.ExpiresAt = limit
	}
	if limit := now.Add(leaseMax); l.Deadline.After(limit) {
		l.Deadline = limit
	}
	return l
}

// storedID is the form of a lease id colocd makes (rand.Text: base32).
var storedID = idShape{1, 128}

// MaxPID is Linux's PID_MAX_LIMIT: no process id is larger.
const MaxPID = 4_194_304

// checkStored says what makes a stored lease unusable, or "". Every field
// that reaches a prediction, the env or the MPS pipe is bounded like a
// request's.
func checkStored(l *Lease) string {
	switch {
	case l == nil:
		return "empty record"
	case !storedID.MatchString(l.ID):
		return fmt.Sprintf("id %q: want 1 to 128 letters, digits, '-' or '_'", truncate(l.ID))
	case !safeToken.MatchString(l.JobID):
		return fmt.Sprintf("job id %q: want 1 to 64 letters, digits, '-' or '_'", truncate(l.JobID))
	case l.TokenHash == [32]byte{}:
		return "no token hash"
	case l.Profile == nil || l.Profile.Kind != predictor.KindTraining:
		return "no training profile"
	case l.MinPct < 1 || l.MinPct > 100:
		return fmt.Sprintf("min percentage %d out of [1, 100]", l.MinPct)
	case l.Pct < l.MinPct || l.Pct > 100:
		return fmt.Sprintf("percentage %d out of [min_pct %d, 100]", l.Pct, l.MinPct)
	case l.MaxPct != 0 && (l.MaxPct < l.Pct || l.MaxPct > 100):
		return fmt.Sprintf("max percentage %d out of [pct %d, 100]", l.MaxPct, l.Pct)
	case l.RunningPct < 0 || l.RunningPct > 100:
		return fmt.Sprintf("running percentage %d out of [0, 100]", l.RunningPct)
	case l.MemoryMiB < 1 || l.MemoryMiB > predictor.MaxMemoryMiB:
		return fmt.Sprintf("memory %d MiB out of [1, %d]", l.MemoryMiB, predictor.MaxMemoryMiB)
	case l.Processes < 0 || l.Processes > MaxProcesses:
		return fmt.Sprintf("processes %d out of [0, %d]", l.Processes, MaxProcesses)
	case l.Priority < MinPriority || l.Priority > MaxPriority:
		return fmt.Sprintf("priority %d out of [%d, %d]", l.Priority, MinPriority, MaxPriority)
	case l.Weight != 0 && !(l.Weight > 0 && l.Weight <= MaxWeight):
		return fmt.Sprintf("weight %g out of (0, %d]", l.Weight, MaxWeight)
	case len(l.PIDs) > MaxProcesses:
		return fmt.Sprintf("%d pids, more than %d", len(l.PIDs), MaxProcesses)
	case len(l.Starts) != 0 && len(l.Starts) != len(l.PIDs):
		return fmt.Sprintf("%d start times for %d pids", len(l.Starts), len(l.PIDs))
	case len(l.StartIDs) != 0 && len(l.StartIDs) != len(l.PIDs):
		return fmt.Sprintf("%d process ids for %d pids", len(l.StartIDs), len(l.PIDs))
	case len(l.Retired) > MaxProcesses:
		return fmt.Sprintf("%d replaced processes, more than %d", len(l.Retired), MaxProcesses)
	case l.ExpiresAt.IsZero() || l.CreatedAt.IsZero():
		return "no creation or expiry time"
	}
	for _, p := range l.PIDs {
		if p < 1 || p > MaxPID {
			return fmt.Sprintf("pid %d out of [1, %d]", p, MaxPID)
		}
	}
	for _, p := range l.Retired {
		if p.PID < 1 || p.PID > MaxPID {
			return fmt.Sprintf("replaced pid %d out of [1, %d]", p.PID, MaxPID)
		}
	}
	if in := l.Instance; in != nil {
		if why := in.check(); why != "" {
			return why
		}
	}
	if err := l.Profile.Validate(); err != nil {
		return err.Error()
	}
	return ""
}
