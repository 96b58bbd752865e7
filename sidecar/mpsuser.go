package sidecar

import (
	"context"
	"os"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/mps"
)

// serverUsers is an MPS daemon that tells which user its server serves.
// An MPS server serves one Linux user: a client of another user waits at
// CUDA init until every client of the running server has exited
// (docs/mps.md#one-user).
type serverUsers interface {
	ServerUser(ctx context.Context) (mps.UID, mps.PID, bool, error)
	Health() mps.Health
}

var (
	_ serverUsers            = (*mps.Control)(nil)
	_ serverUsers            = (*mps.Sim)(nil)
	_ admission.MPSUser      = mpsUser{}
	_ admission.ProcessOwner = hostProcesses{}
)

// mpsUserTimeout bounds the read of the server's user for a register or
// a grant; past it, the last probe's answer is used.
const mpsUserTimeout = 2 * time.Second

// mpsUser tells admission the user the MPS server serves now, or, when the
// daemon does not answer, at its last probe.
type mpsUser struct{ d serverUsers }

func (m mpsUser) ServerUser(ctx context.Context) (uid, server int, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, mpsUserTimeout)
	defer cancel()
	u, pid, ok, err := m.d.ServerUser(ctx)
	if err != nil {
		u, pid, ok = m.d.Health().User()
	}
	return int(u), int(pid), ok
}

// mpsUser is the MPS server's user as the sidecar checks it: that of a
// real daemon's server (nil with the simulated daemon, whose clients are
// made up, or with no daemon).
func (s *Sidecar) mpsUser() admission.MPSUser {
	if s.sim.mps != nil {
		return nil
	}
	if u, ok := s.daemon.(serverUsers); ok {
		return mpsUser{u}
	}
	return nil
}

// grantUser adds the MPS server's user to a grant's lease, so that the
// launcher can check its own before it starts a worker that would wait at
// CUDA init. A lease on a MIG instance runs without MPS.
func (s *Sidecar) grantUser(ctx context.Context, l *v1.Lease) {
	u := s.mpsUser()
	if l == nil || l.Instance != nil || u == nil {
		return
	}
	if uid, _, ok := u.ServerUser(ctx); ok {
		l.MPSServerUID = &uid
	}
}

// wireMPS is the daemon's servers at its last probe, as status shows them.
func wireMPS(h mps.Health) *v1.MPSStatus {
	out := &v1.MPSStatus{Servers: []v1.MPSServer{}}
	for _, sv := range h.Servers {
		ws := v1.MPSServer{PID: int(sv.PID), State: string(sv.State)}
		if sv.UID != nil {
			uid := int(*sv.UID)
			ws.UID = &uid
		}
		out.Servers = append(out.Servers, ws)
	}
	return out
}

// UserOf is the process's real user, from /proc/<pid>/status.
func (h hostProcesses) UserOf(pid int) (int, error) {
	uid, err := h.t.UID(pid)
	return uid, noProcess(err)
}

// ownUID is the sidecar's own user: the simulated daemon's server serves it.
func ownUID() mps.UID { return mps.UID(os.Getuid()) }
