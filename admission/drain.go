package admission

import (
	"context"
	"strings"
	"time"
)

// Drain is an operator's order to stop co-locating on this GPU, before
// maintenance of the GPU or of its server (colocd drain).
type Drain struct {
	// Since is when it was ordered; Reason what the operator said.
	Since  time.Time
	Reason string
}

// message is how a deny or a revoke says it.
func (d *Drain) message() string {
	m := "the sidecar is drained by its operator since " + d.Since.UTC().Format(time.RFC3339)
	if r := strings.TrimSpace(d.Reason); r != "" {
		m += " (" + r + ")"
	}
	return m
}

// Drain stops co-location: from now on every admit and quote is denied
// CodeDraining and no MIG instance is lent, and every live lease is
// revoked with admission.guard.deadline to stop, with revoke events, as a
// removed identity's are. Draining a drained controller changes its
// reason only. It returns the revokes it published.
func (c *Controller) Drain(ctx context.Context, d Drain) ([]Event, error) {
	return c.revokeOperator(ctx, func(*Lease) bool { return true }, func() {
		c.drain = &d
		c.changedLocked() // a decision made before it does not commit
	}, planWhy{op: "revoke for a drain", revoke: d.message() + ": its leases end"})
}

// Undrain opens the controller to admits again.
func (c *Controller) Undrain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drain != nil {
		c.drain = nil
		c.changedLocked()
	}
}

// Draining returns the drain in force, if any.
func (c *Controller) Draining() (Drain, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drain == nil {
		return Drain{}, false
	}
	return *c.drain, true
}
