package launch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
)

// renewer keeps one lease alive: it renews at a third of the time left,
// retries a failed renew (a sidecar restarting, NATS down) with backoff,
// says when the lease is at risk of ending unrenewed, and when it is gone.
type renewer struct {
	c       Client
	sidecar string
	ref     v1.LeaseRef
	// lead is how long before an unrenewed expiry the command must be
	// stopped: atRisk fires then.
	lead time.Duration

	renewed chan *v1.Lease // each successful renew (the latest wins)
	atRisk  chan time.Time // the expiry, once per streak of failures that reaches it minus lead
	lost    chan error     // the lease is gone; the renewer has stopped
	done    chan struct{}
}

// renewTry bounds one renew request.
const renewTry = 5 * time.Second

func startRenewer(ctx context.Context, c Client, sidecar string, ref v1.LeaseRef, expires time.Time, lead time.Duration) *renewer {
	// A lease shorter than twice the lead is stopped at half its term.
	lead = min(lead, time.Until(expires)/2)
	r := &renewer{c: c, sidecar: sidecar, ref: ref, lead: lead,
		renewed: make(chan *v1.Lease, 1), atRisk: make(chan time.Time, 1), lost: make(chan error, 1), done: make(chan struct{})}
	go r.run(ctx, expires)
	return r
}

func (r *renewer) run(ctx context.Context, expires time.Time) {
	defer close(r.done)
	next := renewAt(time.Now(), expires)
	failures := 0
	warned := false
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		// A try that hangs (the sidecar away) must not carry the renewer
		// past the moment the command has to be stopped.
		try := renewTry
		if risk := time.Until(expires.Add(-r.lead)); !warned {
			try = min(try, max(risk, time.Second))
		} else if left := time.Until(expires); left > 0 {
			try = min(try, max(left, 500*time.Millisecond))
		}
		tctx, cancel := context.WithTimeout(ctx, try)
		l, err := r.c.Renew(tctx, r.sidecar, &r.ref)
		cancel()
		now := time.Now()
		if err == nil {
			failures, warned = 0, false
			expires = l.ExpiresAt
			select { // the latest renew wins
			case <-r.renewed:
			default:
			}
			r.renewed <- l
			next = renewAt(now, expires)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if gone := leaseGone(err); gone != nil {
			r.lost <- gone
			return
		}
		if !now.Before(expires) {
			r.lost <- fmt.Errorf("the lease expired at %s unrenewed: %w", expires.Format(time.RFC3339), err)
			return
		}
		if !warned && !now.Before(expires.Add(-r.lead)) {
			warned = true
			r.atRisk <- expires
		}
		failures++
		wait := min(time.Duration(1<<min(failures-1, 3))*time.Second, 5*time.Second, time.Until(expires)/4)
		next = now.Add(max(wait, 250*time.Millisecond))
		if w := expires.Add(-r.lead); !warned && next.After(w) && w.After(now) {
			next = w // wake for the stop, renewing once more then
		}
	}
}

// renewAt is when to renew a lease that expires at expires: a third of
// the time left from now, and at least a second away.
func renewAt(now, expires time.Time) time.Time {
	return now.Add(max(expires.Sub(now)/3, time.Second))
}

// errRevoked is a lease the sidecar revoked.
var errRevoked = errors.New("the lease was revoked")

// leaseGone reports whether a renew's error says the lease is over (nil:
// it may be transient): unknown or expired (404), a wrong token (403), or
// revoked (a 409 that says so; another 409 is a store race, retried).
func leaseGone(err error) error {
	switch v1.CodeOf(err) {
	case v1.CodeNotFound, v1.CodeForbidden:
		return err
	case v1.CodeConflict:
		if strings.Contains(err.Error(), "revoked") {
			return fmt.Errorf("%w: %w", errRevoked, err)
		}
	}
	return nil
}
