package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/internal/proc"
	"github.com/colocd/colocd/mps"
)

// mpsClients is what eviction uses of the MPS daemon, real or simulated.
type mpsClients interface {
	Clients(ctx context.Context) ([]mps.Client, error)
	TerminateClient(ctx context.Context, server, client mps.PID) error
}

var (
	_ mpsClients = (*mps.Control)(nil)
	_ mpsClients = (*mps.Sim)(nil)
)

// evictor ends a lease's processes with terminate_client, and only those:
// a PID that is not a client of the daemon (gone, or never on the GPU), a
// PID now held by a later process (another start time), and a server's own
// PID are left alone. No signal is ever sent: a client that
// terminate_client ended gets CUDA_ERROR_MPS_CLIENT_TERMINATED, and ending
// the process is its launcher's business.
type evictor struct {
	daemon mpsClients
	clock  admission.ProcessClock // nil: start times are not checked
	log    *slog.Logger
}

var _ admission.Evictor = (*evictor)(nil)

func (e *evictor) Evict(ctx context.Context, procs []admission.Process) error {
	clients, err := e.daemon.Clients(ctx)
	if err != nil {
		return fmt.Errorf("evict: list mps clients: %w", err)
	}
	var errs []error
	for _, p := range procs {
		i := slices.IndexFunc(clients, func(c mps.Client) bool { return int(c.PID) == p.PID })
		if i < 0 || slices.ContainsFunc(clients, func(c mps.Client) bool { return int(c.Server) == p.PID }) {
			continue
		}
		if !e.sameProcess(p) {
			continue
		}
		server := clients[i].Server
		if err := e.daemon.TerminateClient(ctx, server, mps.PID(p.PID)); err != nil {
			if e.gone(ctx, p.PID) {
				continue
			}
			errs = append(errs, fmt.Errorf("evict process %d: %w", p.PID, err))
			continue
		}
		e.log.Info("terminated an mps client", "pid", p.PID, "server", int(server))
	}
	return errors.Join(errs...)
}

// sameProcess reports whether p's PID still belongs to the process that
// was registered (always, when the host did not tell its identity). The
// identity is the start in clock ticks after boot: the wall clock's steps
// do not move it, where they move a start time.
func (e *evictor) sameProcess(p admission.Process) bool {
	if e.clock == nil || p.StartID == 0 {
		return true
	}
	_, id, err := e.clock.StartTime(p.PID)
	if err != nil {
		return !errors.Is(err, admission.ErrNoProcess) // unreadable: still treat it as the job's
	}
	if id != p.StartID {
		e.log.Warn("not evicting a pid that a later process now holds", "pid", p.PID, "registered_start_ticks", p.StartID, "start_ticks", id)
		return false
	}
	return true
}

// gone reports whether pid is no longer a client (it exited while being
// terminated).
func (e *evictor) gone(ctx context.Context, pid int) bool {
	clients, err := e.daemon.Clients(ctx)
	return err == nil && !slices.ContainsFunc(clients, func(c mps.Client) bool { return int(c.PID) == pid })
}

// hostProcesses is the host's process table, as admission asks it: start
// times, and the lease id each process was started with.
type hostProcesses struct{ t proc.Table }

var _ admission.ProcessEnv = hostProcesses{}

func (h hostProcesses) StartTime(pid int) (time.Time, uint64, error) {
	at, id, err := h.t.StartTime(pid)
	return at, id, noProcess(err)
}

func (h hostProcesses) LeaseOf(pid int) (string, error) {
	v, _, err := h.t.Getenv(pid, admission.EnvLeaseID)
	return v, noProcess(err)
}

// noProcess maps proc's ErrNoProcess onto admission's.
func noProcess(err error) error {
	if errors.Is(err, proc.ErrNoProcess) {
		return fmt.Errorf("%w: %w", admission.ErrNoProcess, err)
	}
	return err
}
