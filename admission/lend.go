package admission

import (
	"context"
	"fmt"
	"regexp"
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
