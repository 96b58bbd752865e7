package admission

import (
	"context"
	"fmt"
	"time"
)

// publishTimeout bounds the publishing of the throttle events a decision
// made, whose own deadline may have passed.
const publishTimeout = 5 * time.Second

// commitRoomLocked throttles the leases d's joint allocation lowers, before
// d's lease is created: lowering a lease is safe on its own, so a store
// that refuses a write leaves the GPU no worse off, and the job is not
// admitted. It returns the throttle events, and ok = false (nothing
// granted; evaluate again) when a lease it lowers changed or anything else
// moved while the throttles were written. c.mu is held (and released while
// a record is written).
func (c *Controller) commitRoomLocked(ctx context.Context, s *snapshot, d Decision, now time.Time) ([]Event, bool, error) {
	lower := d.Joint.lowers()
	if len(lower) == 0 {
		return nil, true, nil
	}
	planned := make([]liveLease, 0, len(lower))
	pcts := make([]int, 0, len(lower))
	for _, sh := range lower {
		for _, e := range s.live {
			if e.lease.ID == sh.LeaseID {
				planned = append(planned, e)
				pcts = append(pcts, sh.Pct)
			}
		}
	}
	// A write in flight (a renew, a register) moves no capacity: wait for
	// it, then check that nothing else did meanwhile.
	for _, e := range planned {
		if cur, ok := c.leases[e.lease.ID]; ok {
			c.waitWrittenLocked(cur)
		}
	}
	if !c.unchangedLocked(s, c.now()) {
		return nil, false, nil
	}
	for _, e := range planned {
		cur, ok := c.leases[e.lease.ID]
		if !ok || cur.lease.Pct != e.lease.Pct || cur.lease.Revoked {
			return nil, false, nil
		}
	}
	gen := c.gen
	why := planWhy{
		op: "make room",
		throttle: fmt.Sprintf("to make room for job %s (weight %g) by joint allocation, which takes the leases' weighted throughput from %.3f to %.3f",
			d.Joint.Shares[len(d.Joint.Shares)-1].JobID, d.Joint.Shares[len(d.Joint.Shares)-1].Weight, d.Joint.Before, d.Joint.Utility),
		deadline: now.Add(c.cfg.Guard.Deadline),
	}
	events, err := c.applyPlan(ctx, planned, plan{pcts: pcts, revoked: make([]bool, len(planned))}, c.now(), why)
	if err != nil {
		return events, false, err
	}
	// Each throttle applied moved gen once; any other move is someone
	// else's, and the allocation may no longer fit.
	return events, len(events) == len(planned) && c.gen == gen+uint64(len(events)), nil
}
