package admission

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// lend grants the job a free MIG instance whole when there is one: not
// held by a lease that counts (v.lent), with no process and no more than
// IdleInstanceMiB in use, and the job's memory free on it. Of those, the
// one with the most SMs (then the least memory) goes: the job runs fastest
// there. ok is false when none is free, or the instances cannot be read
// (logged): the job then shares the inference server's device as ever.
// The services' predictions are those with the co-located leases alone,
// which the grant does not change.
func (pol *policy) lend(ctx context.Context, req *Request, v *view) (Decision, bool) {
	if pol.instances == nil {
		return Decision{}, false
	}
	insts, err := pol.instances.Lendable(ctx)
	if err != nil {
		pol.log.Warn("reading the MIG instances to lend failed: the job is decided as a co-location", "err", err)
		return Decision{}, false
	}
	free := freeInstances(insts, v, req.memoryMiB())
	if len(free) == 0 {
		return Decision{}, false
	}
	best := slices.MinFunc(free, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(b.SMs, a.SMs), cmp.Compare(a.MemoryMiB, b.MemoryMiB), cmp.Compare(a.UUID, b.UUID))
	})
	g := &InstanceGrant{UUID: best.UUID, Profile: best.Profile, SMs: best.SMs, MemoryMiB: best.MemoryMiB}
	d := Decision{Outcome: Grant, Code: CodeFreeInstance, Pct: 100, Instance: g,
		Message: fmt.Sprintf("MIG instance %s (%s: %d SMs, %d MiB) is free: the job gets it whole, shares it with nobody, and no service's latency changes",
			g.Profile, g.UUID, g.SMs, g.MemoryMiB)}
	if preds, _, err := pol.predictAll(ctx, trainersOf(v.live)); err == nil {
		d.Predictions = preds
	}
	return d, true
}

// freeInstances are those of insts a job that needs need MiB may be lent
// on view v: held by no lease, not faulted, running nothing, and with
// room for it.
func freeInstances(insts []Instance, v *view, need int) []Instance {
	var free []Instance
	for _, in := range insts {
		if !v.holds(in.UUID) && in.Fault == "" && len(in.PIDs) == 0 && in.UsedMiB <= IdleInstanceMiB && need <= in.FreeMiB {
			free = append(free, in)
		}
	}
	return free
}

// holds reports whether a lease of the view holds MIG instance uuid.
func (v *view) holds(uuid string) bool {
	return slices.ContainsFunc(v.lent, func(e liveLease) bool { return e.lease.Instance.UUID == uuid })
}
