package sidecar

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
)

// newUserWorld is an mpsWorld whose fake daemon already runs, with the
// inference server (a made-up PID) as a client of uid serverUID, before
// the sidecar attaches to it; the sidecar reads the servers' users where
// the fake writes them.
func newUserWorld(t *testing.T, serverUID int) *mpsWorld {
	t.Helper()
	w := &mpsWorld{t: t, bin: fakeControl(t)}
	cfg := testConfig(t, "gpu-user", p99At(t, 100)/0.9*1.05)
	dir := t.TempDir()
	w.pipe = filepath.Join(dir, "pipe")
	cfg.MPS.Control, cfg.MPS.PipeDir, cfg.MPS.LogDir = w.bin, w.pipe, filepath.Join(dir, "log")
	d := exec.Command(w.bin, "-d")
	d.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+w.pipe, "CUDA_MPS_LOG_DIRECTORY="+cfg.MPS.LogDir)
	if out, err := d.CombinedOutput(); err != nil {
		t.Fatalf("start the fake daemon: %v: %s", err, out)
	}
	t.Cleanup(w.quitDaemon)
	w.control(fmt.Sprintf("fake_client_connect 999999 %d vllm serve", serverUID))
	w.s = start(t, cfg, Options{MPSProcDir: filepath.Join(w.pipe, "fake-proc")})
	w.c = client(t, w.s)
	return w
}

// mpsStatus waits for the sidecar's status to list an MPS server (the
// health loop's first probe) and returns it.
func (w *mpsWorld) mpsStatus(ctx context.Context) *v1.MPSStatus {
	w.t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		st, err := w.c.Status(ctx, w.s.ID())
		if err != nil {
			w.t.Fatal(err)
		}
		if st.MPS != nil && len(st.MPS.Servers) > 0 {
			return st.MPS
		}
		if time.Now().After(end) {
			w.t.Fatalf("a minute on, status shows no MPS server: %+v", st.MPS)
		}
	}
}

// MPS serves one user at a time. The sidecar shows the server's user in
// status and in each grant, and refuses to register a worker of another
// user (which the daemon keeps waiting until every client of the running
// server, the inference server's, has exited); a worker of the server's
// user registers.
func TestMPSServerUserIsChecked(t *testing.T) {
	t.Parallel()
	me := os.Getuid()
	tests := []struct {
		name   string
		server int    // the inference server's user
		answer string // the fake daemon's answer to the worker's connect
		err    string // "" registers
	}{
		{name: "one user", server: me},
		{name: "another user", server: me + 1, answer: "pending: server",
			err: fmt.Sprintf("pids[0]: want a process of uid %d, the user MPS server", me+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newUserWorld(t, tt.server)
			ctx := context.Background()
			m := w.mpsStatus(ctx)
			if len(m.Servers) != 1 || m.Servers[0].UID == nil || *m.Servers[0].UID != tt.server || m.Servers[0].State != "ACTIVE" {
				t.Fatalf("status mps %+v, want one ACTIVE server of uid %d", m, tt.server)
			}
			d := leased(ctx, t, w.c, w.s.ID(), admitReq("job-u", 10, 100))
			if u := d.Lease.MPSServerUID; u == nil || *u != tt.server {
				t.Fatalf("grant's mps_server_uid %v, want %d", u, tt.server)
			}
			time.Sleep(1100 * time.Millisecond) // past /proc's precision of the grant
			cmd := exec.Command("sleep", "300")
			cmd.Env = append(os.Environ(), "COLOCD_LEASE_ID="+d.Lease.ID)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			pid := cmd.Process.Pid
			if got := w.control(fmt.Sprintf("fake_client_connect %d %d train.py", pid, me)); !strings.HasPrefix(got, tt.answer) {
				t.Fatalf("the daemon answered the worker's connect %q, want %q", got, tt.answer)
			}
			err := register(ctx, w.c, w.s.ID(), d.Lease, pid)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("register a worker of the server's user: %v", err)
				}
				return
			}
			if err == nil || v1.CodeOf(err) != v1.CodeBadRequest || !strings.Contains(err.Error(), tt.err) ||
				!strings.Contains(err.Error(), fmt.Sprintf("got process %d of uid %d", pid, me)) {
				t.Fatalf("register of another user's worker: %v; want a 400 containing %q", err, tt.err)
			}
			t.Logf("refused: %v", err)
		})
	}
}
