package admission

// Store calls never run under c.mu: a store that is slow or down (a full
// disk, a lost JetStream server) would otherwise hold every renew,
// release, register, decision and expiry of the GPU behind one call, for
// as long as its timeout. A lease whose record is being written is marked
// (entry.writing); whoever else must change that lease waits for the write
// to end (c.written, a condition on c.mu), and everyone else goes on. A new
// lease is in c.leases, marked, while its record is created, so that its
// capacity is taken from the moment the grant commits; if the store refuses
// it, it is removed again and nothing was granted.

// writeLocked runs call, a store call for e's record, with c.mu released
// and e marked as being written; other changes to e wait until it returns.
// c.mu is held.
func (c *Controller) writeLocked(e *entry, call func() error) error {
	c.waitWrittenLocked(e)
	e.writing = true
	c.mu.Unlock()
	err := call()
	c.mu.Lock()
	e.writing = false
	c.written.Broadcast()
	c.signal() // the expiry loop skipped e while it was written
	return err
}

// waitWrittenLocked waits until no write of e is in flight. c.mu is held
// (and released while waiting).
func (c *Controller) waitWrittenLocked(e *entry) {
	for e.writing {
		c.written.Wait()
	}
}

// authWritable is auth for a change: it first waits out a write of the
// lease in flight (a renew that may extend it), then checks the lease at
// the time that write ended. c.mu is held.
func (c *Controller) authWritable(id, token string) (*entry, error) {
	for {
		e, ok := c.leases[id]
		if !ok || !e.writing {
			return c.auth(id, token, c.now())
		}
		c.waitWrittenLocked(e)
	}
}
