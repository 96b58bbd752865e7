package admission

import (
	"context"
	"errors"
	"fmt"
)

// Resync writes every live lease to the store again as a new record. After
// the store lost its records (its bucket was deleted, or an external
// server's JetStream files were lost), the controller's memory is the truth:
// the sidecar recreates the bucket and calls Resync. It returns how many
// leases it wrote; a lease the store refuses keeps its old revision and is
// named in the error.
func (c *Controller) Resync(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	n := 0
	for _, e := range c.liveLocked(c.now()) {
		c.waitWrittenLocked(e)
		if c.leases[e.lease.ID] != e {
			continue // released or expired meanwhile
		}
		l := e.lease.clone()
		l.Revision = 0
		if err := c.writeLocked(e, func() error { return c.deps.Store.Save(ctx, &l) }); err != nil {
			errs = append(errs, fmt.Errorf("lease %s: %w", l.ID, err))
			continue
		}
		e.lease.Revision = l.Revision
		n++
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("resync leases: %w", err)
	}
	return n, nil
}
