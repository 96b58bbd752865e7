package sidecar

import (
	"log/slog"
	"sync"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/internal/proc"
	"github.com/colocd/colocd/mps"
)

// simDevice is a simulated GPU and MPS daemon made to show the live leases
// as real ones show the jobs' processes: GPU memory used by each lease
// whose processes have started (on the MIG instance it holds, if any), and
// one MPS client per registered PID of a co-located lease at its
// percentage. A real GPU or daemon needs none of it: NVML and
// the daemon see the processes themselves.
type simDevice struct {
	gpu *gpu.SimDevice // nil: a real GPU
	mps *mps.Sim       // nil: a real daemon, or time slicing
	log *slog.Logger

	// exists tells whether a process still runs (nil: read /proc): a real
	// daemon drops a client that exited, so the simulated one does too.
	exists func(pid int) bool

	mu     sync.Mutex
	pids   map[int]bool    // simulated MPS clients, by PID
	grants map[string]bool // simulated GPU memory reservations, by lease
}

// processExists reports whether pid is a process that has not exited.
func processExists(pid int) bool { return proc.Table{}.Running(pid) }

// simulated reports whether there is anything to show the leases on.
func (d *simDevice) simulated() bool { return d.gpu != nil || d.mps != nil }

// show makes the simulated devices show leases. A lease's memory is used
// once its PIDs are registered or window (admission's VisibilityWindow)
// has passed since its grant: from then on admission no longer subtracts
// it from the GPU's free memory as not yet visible, and counts on the GPU
// to show it. A client the daemon refuses is tried again on the next call;
// memory that does not fit is logged and not tried again for that lease.
func (d *simDevice) show(leases []admission.Lease, window time.Duration) {
	if !d.simulated() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pids == nil {
		d.pids = map[int]bool{}
	}
	live := map[int]bool{}
	reserved := map[string]bool{}
	for _, l := range leases {
		on := "" // the device itself, or the MIG instance the lease holds
		if l.Instance != nil {
			on = l.Instance.UUID
		}
		if d.gpu != nil && (len(l.PIDs) > 0 || time.Since(l.CreatedAt) >= window) {
			reserved[l.ID] = true
			if !d.grants[l.ID] {
				if err := d.gpu.ReserveOn(on, l.ID, uint64(l.MemoryMiB)); err != nil {
					d.log.Warn("simulated gpu: reserve", "lease", l.ID, "err", err)
				}
			}
		}
		if on != "" {
			continue // alone on its instance: no MPS client of this daemon
		}
		exists := d.exists
		if exists == nil {
			exists = processExists
		}
		for _, pid := range l.PIDs {
			if !exists(pid) {
				continue // exited: no client of any daemon
			}
			live[pid] = true
			if d.mps != nil && !d.pids[pid] {
				if err := d.mps.AddClient(mps.PID(pid), mps.Percentage(l.Pct)); err == nil {
					d.pids[pid] = true
				}
			}
		}
	}
	for id := range d.grants {
		if !reserved[id] {
			d.gpu.Release(id)
		}
	}
	d.grants = reserved
	for pid := range d.pids {
		if !live[pid] {
			d.mps.RemoveClient(mps.PID(pid))
			delete(d.pids, pid)
		}
	}
}
