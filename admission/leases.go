package admission

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	v1 "github.com/colocd/colocd/api/v1"
	"slices"
	"strconv"
	"time"

	"github.com/colocd/colocd/predictor"
)

// auth finds the live lease id and checks token against its hash in constant
// time. c.mu is held.
func (c *Controller) auth(id, token string, now time.Time) (*entry, error) {
	e, ok := c.leases[id]
	if !ok || !now.Before(e.lease.ExpiresAt) {
		return nil, fmt.Errorf("lease %q: %w", id, ErrNotFound)
	}
	h := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(h[:], e.lease.TokenHash[:]) != 1 {
		return nil, fmt.Errorf("lease %q: %w", id, ErrForbidden)
	}
	return e, nil
}

// update stores the changed copy l of e's lease (compare-and-swap on its
// revision), without the lock (write.go), and, once stored, makes it the
// live one. c.mu is held; l must be a copy made after any write of e ended.
func (c *Controller) update(ctx context.Context, op string, e *entry, l Lease) error {
	if err := c.writeLocked(e, func() error { return c.deps.Store.Save(ctx, &l) }); err != nil {
		return errStore(op, err)
	}
	e.lease = l
	return nil
}

// Renew extends a live lease by its own duration from now (capped at
// Config.LeaseMax); the first renew ends a new lease's first term. It only
// takes the lock, never waiting for a prediction. Errors: ErrNotFound (unknown or expired), ErrForbidden
// (wrong token; nothing changes), ErrConflict (revoked, or the store moved),
// ErrUnavailable (store down).
func (c *Controller) Renew(ctx context.Context, leaseID, token string) (Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.authWritable(leaseID, token)
	if err != nil {
		return Lease{}, fmt.Errorf("renew: %w", err)
	}
	now := c.now()
	if e.lease.Revoked {
		return Lease{}, fmt.Errorf("renew: lease %q was revoked and ends at %s: %w", leaseID, e.lease.ExpiresAt.Format(time.RFC3339), ErrConflict)
	}
	l := e.lease.clone()
	l.ExpiresAt = now.Add(min(l.Duration, c.cfg.Lease.Max))
	if err := c.update(ctx, "renew", e, l); err != nil { // wakes the expiry loop
		return Lease{}, err
	}
	return e.lease.public(), nil
}

// Release ends a lease now and frees its capacity (no event: the launcher
// asked). A lease with processes colocd can still evict is not freed at
// once: it is marked released and ended, and the expiry loop evicts any of
// its processes still on the GPU, then frees it (with an expire event), so
// that a launcher cannot release a lease and keep its workers running.
// Errors as for Renew; on a store error the lease stays.
func (c *Controller) Release(ctx context.Context, leaseID, token string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.authWritable(leaseID, token)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	l := e.lease.clone()
	if c.deps.Evictor != nil && len(l.PIDs)+len(l.Retired) > 0 {
		now := c.now()
		l.Released, l.Revoked, l.ExpiresAt, l.Deadline = true, true, now, now
		if err := c.update(ctx, "release", e, l); err != nil {
			return err
		}
		c.signal()
		return nil
	}
	if err := c.writeLocked(e, func() error { return c.deps.Store.Delete(ctx, &l) }); err != nil && !errors.Is(err, ErrNotFound) {
		return errStore("release", err)
	}
	c.forget(&e.lease)
	return nil
}

// Register records the job's GPU process ids, replacing any registered
// before (a job that restarts its workers registers the new ones). They
// identify its MPS clients for eviction, and make its memory count through
// NVML rather than as not-yet-visible. Like a renew it extends the lease to
// its full duration from now (never shortens it): the launcher that
// registers has its grant. After a throttle, a register is how the
// launcher shows its workers restarted at the new percentage. The
// processes a register replaces stay tracked, and any still on the GPU is
// evicted at the throttle's deadline (or ThrottleGrace after the
// register).
//
// Errors as for Renew; ErrConflict for a revoked lease (its processes are
// evicted at its deadline; none can be swapped in) and for more than
// MaxProcesses replaced processes still to end; ErrInvalid for bad pids:
// each in [1, MaxPID], no repeats, at most the request's processes when it
// gave a count (else MaxProcesses), none held by another live lease; when
// the Device is a ProcessLister, each a process on the GPU; when a
// ProcessClock is set, each a running process that started after the lease
// was granted, or after its last throttle (to the second: /proc's
// precision), so that no process that ran before it (the inference
// server's) can be registered; and when it is a ProcessEnv, each started
// with this lease's EnvLeaseID, so that no launcher can register another
// job's worker; when it is a ProcessOwner and an MPSUser tells the MPS
// server's user, each a process of that user (a client of another user
// would wait at CUDA init until every client of the server has exited).
// ErrUnavailable when the GPU's or the host's processes
// cannot be read.
func (c *Controller) Register(ctx context.Context, leaseID, token string, pids []int) error {
	var f fields
	if len(pids) == 0 || len(pids) > MaxProcesses {
		// Said at once: no work, and no error text, grows with the list.
		f.add("pids", fmt.Sprintf("1 to %d process ids", MaxProcesses), strconv.Itoa(len(pids)))
		return f.err("register")
	}
	seen := make(map[int]bool, len(pids))
	for i, p := range pids {
		if p < 1 || p > MaxPID {
			f.add(fmt.Sprintf("pids[%d]", i), fmt.Sprintf("a process id in [1, %d]", MaxPID), strconv.Itoa(p))
		} else if seen[p] {
			f.add(fmt.Sprintf("pids[%d]", i), "a process id not already listed", strconv.Itoa(p))
		}
		seen[p] = true
	}
	if err := f.err("register"); err != nil {
		return err
	}
	// What the host says of the PIDs, read before the lock (device and
	// /proc calls); checked after the token, so that only a lease's holder
	// learns anything about its PIDs.
	onGPU, lentPIDs, lentErr, host, err := c.inspect(ctx, pids)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.authWritable(leaseID, token)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	now := c.now()
	if e.lease.Revoked {
		return fmt.Errorf("register: lease %q was revoked and ends at %s: its processes are evicted then: %w", leaseID, e.lease.ExpiresAt.Format(time.RFC3339), ErrConflict)
	}
	if n := e.lease.Processes; n > 0 && len(pids) > n {
		f.add("pids", fmt.Sprintf("at most the %d processes the job was admitted with", n), strconv.Itoa(len(pids)))
		return f.err("register")
	}
	if in := e.lease.Instance; in != nil && onGPU != nil {
		if lentErr != nil {
			return fmt.Errorf("register: %w: reading the processes of MIG instance %s failed: %w", ErrUnavailable, in.UUID, lentErr)
		}
		onGPU = lentPIDs[in.UUID] // its processes run on its instance
		if onGPU == nil {
			onGPU = []int{}
		}
	}
	c.checkPIDsLocked(&f, e, pids, onGPU, host, now)
	if err := f.err("register"); err != nil {
		return err
	}
	l := e.lease.clone()
	// The processes this register replaces must end: by the throttle's
	// deadline, or the grace after now. They stay tracked until evicted.
	due := now.Add(c.cfg.Guard.Deadline)
	if l.awaitingRestart() {
		due = l.Deadline
	}
	for _, p := range l.procs() {
		if !slices.Contains(pids, p.PID) {
			p.Due = due
			l.Retired = append(l.Retired, p)
		}
	}
	if len(l.Retired) > MaxProcesses {
		return fmt.Errorf("register: %d replaced processes of lease %q are still to end (at most %d): register again once they are gone: %w",
			len(l.Retired), leaseID, MaxProcesses, ErrConflict)
	}
	l.PIDs, l.Starts, l.StartIDs, l.RegisteredAt, l.RunningPct = slices.Clone(pids), host.at, host.ids, now, l.Pct
	if full := now.Add(min(l.Duration, c.cfg.Lease.Max)); !l.Revoked && full.After(l.ExpiresAt) {
		l.ExpiresAt = full
	}
	if err := c.update(ctx, "register", e, l); err != nil { // wakes the expiry loop
		return err
	}
	c.movedLocked()
	return nil
}

// startSlack is how much earlier than the lease's grant (or throttle) a
// registered process may seem to start: /proc gives the boot time in whole
// seconds.
const startSlack = time.Second

// hostView is what the host says of the PIDs of a register: each one's
// start and id (nil without a ProcessClock) and its COLOCD_LEASE_ID (nil
// without a ProcessEnv).
type hostView struct {
	at     []time.Time
	ids    []uint64
	leases []string
	// uids are the processes' users and mps the MPS server they must be
	// clients of; nil when not checked.
	uids []int
	mps  *mpsServer
}

// mpsServer is the running MPS server: its PID and the user it serves.
type mpsServer struct{ pid, uid int }

// inspect reads, for Register, the GPU's compute processes (nil when the
// Device lists none) and those of each MIG instance that may be lent (by
// UUID; read only when the Device lists processes; lentErr when that read
// failed, which matters only to a lease that holds an instance), and what
// the host says of each pid. A pid with no process is a field error.
func (c *Controller) inspect(ctx context.Context, pids []int) (onGPU []int, lent map[string][]int, lentErr error, hv hostView, err error) {
	if pl, ok := c.deps.Device.(ProcessLister); ok {
		if onGPU, err = pl.ComputePIDs(ctx); err != nil {
			return nil, nil, nil, hv, fmt.Errorf("register: %w: reading the GPU's processes failed: %w", ErrUnavailable, err)
		}
		if onGPU == nil {
			onGPU = []int{}
		}
		if c.deps.Instances != nil {
			insts, err := c.deps.Instances.Lendable(ctx)
			lent, lentErr = map[string][]int{}, err
			for _, in := range insts {
				lent[in.UUID] = in.PIDs
			}
		}
	}
	if c.deps.Processes == nil {
		return onGPU, lent, lentErr, hv, nil
	}
	env, _ := c.deps.Processes.(ProcessEnv)
	owner, _ := c.deps.Processes.(ProcessOwner)
	if owner != nil && c.deps.MPSUser != nil {
		if uid, server, ok := c.deps.MPSUser.ServerUser(ctx); ok {
			hv.mps, hv.uids = &mpsServer{pid: server, uid: uid}, make([]int, len(pids))
		}
	}
	var f fields
	hv.at, hv.ids = make([]time.Time, len(pids)), make([]uint64, len(pids))
	if env != nil {
		hv.leases = make([]string, len(pids))
	}
	for i, p := range pids {
		at, id, err := c.deps.Processes.StartTime(p)
		if err == nil && env != nil {
			hv.leases[i], err = env.LeaseOf(p)
		}
		if err == nil && hv.uids != nil {
			hv.uids[i], err = owner.UserOf(p)
		}
		switch {
		case errors.Is(err, ErrNoProcess):
			f.add(fmt.Sprintf("pids[%d]", i), "a running process", strconv.Itoa(p))
		case err != nil:
			return nil, nil, nil, hv, fmt.Errorf("register: %w: reading process %d failed: %w", ErrUnavailable, p, err)
		}
		hv.at[i], hv.ids[i] = at, id
	}
	return onGPU, lent, lentErr, hv, f.err("register")
}

// checkPIDsLocked adds a field error for each pid that is not of the MPS
// server's user (hv.uids non-nil), that was not started
// with this lease's EnvLeaseID (hv.leases non-nil), that another live lease
// holds, that is not on the GPU (onGPU non-nil), or that started before the
// lease was granted or last throttled (hv.at non-nil). c.mu is held.
func (c *Controller) checkPIDsLocked(f *fields, e *entry, pids, onGPU []int, hv hostView, now time.Time) {
	since := e.lease.CreatedAt
	if !e.lease.ThrottledAt.IsZero() {
		since = e.lease.ThrottledAt
	}
	for i, p := range pids {
		name := fmt.Sprintf("pids[%d]", i)
		switch {
		case hv.uids != nil && e.lease.Instance == nil && hv.uids[i] != hv.mps.uid: // a MIG instance's job runs without MPS
			f.add(name, fmt.Sprintf("a process of uid %d, the user MPS server %d serves (a client of another user waits at CUDA init until every client of that server has exited: run the job as uid %d)",
				hv.mps.uid, hv.mps.pid, hv.mps.uid), fmt.Sprintf("process %d of uid %d", p, hv.uids[i]))
		case hv.leases != nil && hv.leases[i] != e.lease.ID:
			f.add(name, fmt.Sprintf("a worker started with the grant's env (%s of this lease)", EnvLeaseID), strconv.Itoa(p))
		case c.heldByOtherLocked(e, p, now):
			f.add(name, "a process id no other lease holds", strconv.Itoa(p))
		case onGPU != nil && !slices.Contains(onGPU, p) && e.lease.Instance != nil:
			f.add(name, "a process with a CUDA context on the lease's MIG instance "+e.lease.Instance.UUID+" (register once the job's processes have started on it)", strconv.Itoa(p))
		case onGPU != nil && !slices.Contains(onGPU, p):
			f.add(name, "a process with a CUDA context on this GPU (register once the job's processes have started on it)", strconv.Itoa(p))
		case hv.at != nil && hv.at[i].Before(since.Add(-startSlack)):
			f.add(name, fmt.Sprintf("a process started after %s, when the lease was granted or last throttled (a process that ran before cannot be the job's)", since.UTC().Format(time.RFC3339)),
				fmt.Sprintf("%d, started %s", p, hv.at[i].UTC().Format(time.RFC3339)))
		}
	}
}

// heldByOtherLocked reports whether a live lease other than e holds pid,
// registered or replaced.
func (c *Controller) heldByOtherLocked(e *entry, pid int, now time.Time) bool {
	for _, o := range c.leases {
		if o != e && c.countsLocked(o, now) && (slices.Contains(o.lease.PIDs, pid) || slices.ContainsFunc(o.lease.Retired, func(r Process) bool { return r.PID == pid })) {
			return true
		}
	}
	return false
}

// forget drops a lease from memory. c.mu is held.
func (c *Controller) forget(l *Lease) {
	c.freedLocked()
	c.movedLocked()
	delete(c.leases, l.ID)
	c.g.holds.forget(l.ID)
	if c.byRequest[l.RequestHash] == l.ID {
		delete(c.byRequest, l.RequestHash)
	}
}

// Leases returns copies of the live leases, oldest first, without token
// material.
func (c *Controller) Leases() []Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.liveLocked(c.now())
	out := make([]Lease, len(live))
	for i, e := range live {
		out[i] = e.lease.public()
	}
	return out
}

// The environment variables of a grant, as the wire contract names them
// (api/v1): the lease's id (with a ProcessEnv, Register accepts only
// processes started with it), and MPS's.
const (
	EnvLeaseID       = v1.EnvLeaseID
	EnvPipeDirectory = v1.EnvPipeDirectory
	EnvActiveThreads = v1.EnvActiveThreads
	EnvPinnedMemory  = v1.EnvPinnedMemory
	EnvPriority      = v1.EnvPriority
	// EnvVisibleDevices names the MIG device a job must use, when the
	// sidecar guards one (Config.VisibleDevice).
	EnvVisibleDevices = v1.EnvVisibleDevices
)

// Env is the environment the launcher sets for every process of lease l
// before it starts: the lease's id (EnvLeaseID), by which colocd tells the
// job's processes from any other's, and in MPS mode the pipe directory;
// the active-thread percentage (fixed for a client's life, so a throttle
// is a restart); the pinned-memory limit "0=<MiB>M", where 0 is the
// device's index as the client sees it — one daemon per GPU, started with
// CUDA_VISIBLE_DEVICES set to that GPU, so it is always device 0 — and the
// limit counts CUDA's own allocations too; and client priority 1 (below
// normal: training yields to inference, as a hint).
//
// On a MIG device (Config.VisibleDevice) the job also sets
// CUDA_VISIBLE_DEVICES to the device's UUID, in either mode: its MPS
// daemon serves that device alone, and so must the job's processes.
// A lease that holds a MIG instance whole (Lease.Instance) sets only its id
// and CUDA_VISIBLE_DEVICES to that instance: no MPS daemon serves it, and
// the job must not set CUDA_MPS_PIPE_DIRECTORY.
func (c *Controller) Env(l Lease) map[string]string {
	env := map[string]string{EnvLeaseID: l.ID}
	if l.Instance != nil { // alone on its instance: no MPS, no limits
		env[EnvVisibleDevices] = l.Instance.UUID
		return env
	}
	if c.cfg.VisibleDevice != "" {
		env[EnvVisibleDevices] = c.cfg.VisibleDevice
	}
	if c.cfg.Mode != predictor.ModeMPS {
		return env
	}
	env[EnvPipeDirectory] = c.cfg.PipeDir
	env[EnvActiveThreads] = strconv.Itoa(l.Pct)
	env[EnvPinnedMemory] = fmt.Sprintf("0=%dM", l.MemoryMiB)
	env[EnvPriority] = "1"
	return env
}
