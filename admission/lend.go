package admission

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Instances lists the MIG instances of the GPU a job may be granted whole
// (gpu.grant_instances), with what runs on each now.
type Instances interface {
	Lendable(ctx context.Context) ([]Instance, error)
}

// Instance is a MIG instance that may be lent, as read now.
type Instance struct {
	UUID, Profile string
	SMs           int
	// MemoryMiB is its memory; UsedMiB and FreeMiB as NVML measures them.
	MemoryMiB, UsedMiB, FreeMiB int
	// PIDs are the compute processes NVML lists on it.
	PIDs []int
}

// IdleInstanceMiB is the most memory an instance may have in use and still
// be free: a CUDA context alone takes more, and NVML lists the processes
// of a MIG device only to a privileged reader, so memory in use is what
// shows an unprivileged sidecar that something runs there.
const IdleInstanceMiB = 256

// lend grants the job a free MIG instance whole when there is one: not
// held by a lease that counts (s.lent), with no process and no more than
// IdleInstanceMiB in use, and the job's memory free on it. Of those, the
// one with the most SMs (then the least memory) goes: the job runs fastest
// there. ok is false when none is free, or the instances cannot be read
// (logged): the job then shares the inference server's device as ever.
// The services' predictions are those with the co-located leases alone,
// which the grant does not change.
func (c *Controller) lend(ctx context.Context, req *Request, s *snapshot) (Decision, bool) {
	if c.deps.Instances == nil {
		return Decision{}, false
	}
	insts, err := c.deps.Instances.Lendable(ctx)
	if err != nil {
		c.log.Warn("reading the MIG instances to lend failed: the job is decided as a co-location", "err", err)
		return Decision{}, false
	}
	need := req.memoryMiB()
	var free []Instance
	for _, in := range insts {
		if !s.holds(in.UUID) && len(in.PIDs) == 0 && in.UsedMiB <= IdleInstanceMiB && need <= in.FreeMiB {
			free = append(free, in)
		}
	}
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
	if preds, _, err := c.predictAll(ctx, trainersOf(s.live)); err == nil {
		d.Predictions = preds
	}
	return d, true
}

// holds reports whether a lease of the snapshot holds MIG instance uuid.
func (s *snapshot) holds(uuid string) bool {
	return slices.ContainsFunc(s.lent, func(e entry) bool { return e.lease.Instance.UUID == uuid })
}

// heldLocked reports whether a lease that counts at now holds MIG
// instance uuid. c.mu is held.
func (c *Controller) heldLocked(uuid string, now time.Time) bool {
	for _, e := range c.leases {
		if e.lease.Instance != nil && e.lease.Instance.UUID == uuid && c.countsLocked(e, now) {
			return true
		}
	}
	return false
}

// migUUID is a MIG device's UUID as NVML gives it, the only value a stored
// lease may put in a job's CUDA_VISIBLE_DEVICES.
var migUUID = regexp.MustCompile(`^MIG-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// migProfile is a GPU instance profile's name, as "3g.71gb" or
// "1g.18gb+me" ("" when the device's name gave none).
var migProfile = regexp.MustCompile(`^([1-7]g\.[0-9]{1,4}gb(\+[a-z]{1,8})?)?$`)

// check says what is wrong with a stored lease's instance ("" if nothing).
func (g *InstanceGrant) check() string {
	switch {
	case !migUUID.MatchString(g.UUID):
		return fmt.Sprintf("instance uuid %q: want a MIG device UUID (MIG- and 8-4-4-4-12 hex digits)", truncate(g.UUID))
	case !migProfile.MatchString(g.Profile):
		return fmt.Sprintf("instance profile %q: want a GPU instance profile such as 3g.71gb", truncate(g.Profile))
	case g.SMs < 1 || g.SMs > predictor.MaxDeviceSMs:
		return fmt.Sprintf("instance sms %d out of [1, %d]", g.SMs, predictor.MaxDeviceSMs)
	case g.MemoryMiB < 1 || g.MemoryMiB > predictor.MaxMemoryMiB:
		return fmt.Sprintf("instance memory %d MiB out of [1, %d]", g.MemoryMiB, predictor.MaxMemoryMiB)
	}
	return ""
}
