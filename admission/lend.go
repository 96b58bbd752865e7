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
	// Fault, when set, is a fault of the instance (a critical XID): it is
	// not lent, and Guard revokes a lease that holds it.
	Fault string
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
	free := freeInstances(insts, s, req.memoryMiB())
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

// freeInstances are those of insts a job that needs need MiB may be lent
// on snapshot s: held by no lease, not faulted, running nothing, and with
// room for it.
func freeInstances(insts []Instance, s *snapshot, need int) []Instance {
	var free []Instance
	for _, in := range insts {
		if !s.holds(in.UUID) && in.Fault == "" && len(in.PIDs) == 0 && in.UsedMiB <= IdleInstanceMiB && need <= in.FreeMiB {
			free = append(free, in)
		}
	}
	return free
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

// migUUID is a MIG device's UUID as NVML gives it (lower-case hex), the
// only value a stored lease may put in a job's CUDA_VISIBLE_DEVICES.
var migUUID = regexp.MustCompile(`^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// migProfile is a GPU instance profile's name, as "3g.71gb" or
// "1g.18gb+me" ("" when the device's name gave none).
var migProfile = regexp.MustCompile(`^([1-7]g\.[0-9]{1,4}gb(\+[a-z]{1,8})?)?$`)

// check says what is wrong with a stored lease's instance ("" if nothing).
func (g *InstanceGrant) check() string {
	switch {
	case !migUUID.MatchString(g.UUID):
		return fmt.Sprintf("instance uuid %q: want a MIG device UUID (MIG- and 8-4-4-4-12 lower-case hex digits)", truncate(g.UUID))
	case !migProfile.MatchString(g.Profile):
		return fmt.Sprintf("instance profile %q: want a GPU instance profile such as 3g.71gb", truncate(g.Profile))
	case g.SMs < 1 || g.SMs > predictor.MaxDeviceSMs:
		return fmt.Sprintf("instance sms %d out of [1, %d]", g.SMs, predictor.MaxDeviceSMs)
	case g.MemoryMiB < 1 || g.MemoryMiB > predictor.MaxMemoryMiB:
		return fmt.Sprintf("instance memory %d MiB out of [1, %d]", g.MemoryMiB, predictor.MaxMemoryMiB)
	}
	return ""
}

// restoring is what Restore knows of the instances it may lend: the
// lendable ones as read at the restart (nil when unreadable) and those the
// leases restored so far hold.
type restoring struct {
	lends    bool
	readable map[string]Instance
	held     map[string]string // instance UUID → lease
}

// restoreInstances reads the lendable instances once for Restore; a read
// that fails is logged, and the instances' records are then checked
// without it.
func (c *Controller) restoreInstances(ctx context.Context) *restoring {
	r := &restoring{lends: c.deps.Instances != nil, held: map[string]string{}}
	if !r.lends {
		return r
	}
	insts, err := c.deps.Instances.Lendable(ctx)
	if err != nil {
		c.log.Warn("restore leases: the MIG instances cannot be read; leases that hold one are kept unchecked against them", "err", err)
		return r
	}
	r.readable = map[string]Instance{}
	for _, in := range insts {
		r.readable[in.UUID] = in
	}
	return r
}

// check says why stored lease l cannot hold its instance ("" when it can,
// and then records it held and takes the instance's figures from the
// read): only one of this sidecar's lendable instances, never the guarded
// device (visible), and one lease each. A record from the store is not
// trusted: its uuid becomes a job's CUDA_VISIBLE_DEVICES.
func (r *restoring) check(l *Lease, visible string) string {
	uuid := l.Instance.UUID
	switch {
	case !r.lends:
		return "this sidecar lends no MIG instance (gpu.grant_instances)"
	case uuid == visible:
		return "its instance is the sidecar's own device " + uuid
	case r.held[uuid] != "":
		return "its instance " + uuid + " is held by lease " + r.held[uuid]
	}
	if r.readable != nil {
		in, ok := r.readable[uuid]
		if !ok {
			return "its instance " + uuid + " is not one this sidecar may lend (gpu.grant_instances)"
		}
		l.Instance = &InstanceGrant{UUID: in.UUID, Profile: in.Profile, SMs: in.SMs, MemoryMiB: in.MemoryMiB}
	}
	r.held[uuid] = l.ID
	return ""
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
