package replay

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/predictor"
)

// Launcher describes the simulated training launcher.
type Launcher struct {
	// Profile is one step of the training job it runs.
	Profile *predictor.Profile
	// MemoryMiB, MinPct and MaxPct are what it asks for.
	MemoryMiB, MinPct, MaxPct int
	// Restart is how long its workers take to restart from a checkpoint
	// at a new percentage (after a throttle with a deadline, or a raise).
	Restart time.Duration
	// Renew is how often it renews its lease, and Term the lease it asks for.
	Renew, Term time.Duration
	// RetryDeny is how long it waits after a deny, RetryRevoke after a
	// revoke or an expiry, before it asks again.
	RetryDeny, RetryRevoke time.Duration
}

// DefaultLauncher is the launcher of a replay that names none: a
// checkpointable job of 4 GiB that runs at 10 to 100 %, restarts in 20 s,
// renews a 5-minute lease each minute, and asks again 30 s after a deny
// and a minute after a revoke.
func DefaultLauncher(profile *predictor.Profile) Launcher {
	return Launcher{Profile: profile, MemoryMiB: 4096, MinPct: 10, MaxPct: 100, Restart: 20 * time.Second,
		Renew: time.Minute, Term: 5 * time.Minute, RetryDeny: 30 * time.Second, RetryRevoke: time.Minute}
}

// launcher is a Launcher's state during a replay.
type launcher struct {
	Launcher
	c *admission.Controller
	n int // requests made

	lease      string
	token      string
	pct        int       // the lease's percentage the workers start at
	running    int       // the percentage the workers run at (0: stopped)
	pid        int       // the workers' process while they run
	upAt       time.Time // when stopped workers are running again
	nextAsk    time.Time
	nextRenew  time.Time
	registered int
}

// step acts on the controller's events for its lease, then asks, starts
// its workers or renews as its time has come.
func (l *launcher) step(ctx context.Context, now time.Time, events []admission.Event) error {
	for _, ev := range events {
		if ev.LeaseID != l.lease {
			continue
		}
		switch ev.Type {
		case admission.EventThrottle:
			if !ev.Deadline.IsZero() { // restart at the lower percentage
				l.pct, l.running, l.upAt = ev.Pct, 0, now.Add(l.Restart)
			} else {
				l.pct = ev.Pct
			}
		case admission.EventRaise:
			l.pct, l.running, l.upAt = ev.Pct, 0, now.Add(l.Restart)
		case admission.EventRevoke: // stop the workers and give the slot back
			_ = l.c.Release(ctx, l.lease, l.token) // a lease already gone is no matter
			l.lease, l.running, l.nextAsk = "", 0, now.Add(l.RetryRevoke)
		case admission.EventExpire:
			l.lease, l.running, l.nextAsk = "", 0, now.Add(l.RetryRevoke)
		}
	}
	if l.lease == "" {
		if now.Before(l.nextAsk) {
			return nil
		}
		l.n++
		token := fmt.Sprintf("replay-token-%d", l.n)
		d, err := l.c.Decide(ctx, admission.Request{RequestID: fmt.Sprintf("replay-request-id-number-%06d", l.n), TokenHash: sha256.Sum256([]byte(token)),
			JobID: "replay", Owner: "replay", Profile: l.Profile, MemoryMiB: l.MemoryMiB, Processes: 1, MinPct: l.MinPct, MaxPct: l.MaxPct,
			LeaseSeconds: int(l.Term / time.Second), Checkpointable: true})
		if err != nil {
			return fmt.Errorf("admit: %w", err)
		}
		if d.Lease == nil {
			l.nextAsk = now.Add(l.RetryDeny)
			return nil
		}
		l.lease, l.token, l.pct, l.running, l.upAt, l.nextRenew = d.Lease.ID, token, d.Lease.Pct, 0, now.Add(l.Restart), now.Add(l.Renew)
	}
	if l.running == 0 && !now.Before(l.upAt) {
		l.registered++
		if err := l.c.Register(ctx, l.lease, l.token, []int{1000 + l.registered}); err != nil {
			return fmt.Errorf("register: %w", err)
		}
		l.running, l.pid = l.pct, 1000+l.registered
	}
	if !now.Before(l.nextRenew) {
		if _, err := l.c.Renew(ctx, l.lease, l.token); err != nil {
			l.lease, l.running, l.nextAsk = "", 0, now.Add(l.RetryRevoke)
			return nil
		}
		l.nextRenew = now.Add(l.Renew)
	}
	return nil
}

// target is the percentage the launcher's job is to run at: its lease's,
// also while its workers restart, or 0 without a lease.
func (l *launcher) target() int {
	if l.lease == "" {
		return 0
	}
	return l.pct
}
