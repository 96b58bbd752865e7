package sidecar

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
)

var fakeMPS struct {
	sync.Once
	bin string
	err error
}

// fakeControl builds the fake nvidia-cuda-mps-control (mps/internal/fakemps)
// once per test run.
func fakeControl(t *testing.T) string {
	t.Helper()
	fakeMPS.Do(func() {
		dir, err := os.MkdirTemp("", "colocd-fakemps-")
		if err != nil {
			fakeMPS.err = err
			return
		}
		fakeMPS.bin = filepath.Join(dir, "nvidia-cuda-mps-control")
		out, err := exec.Command("go", "build", "-o", fakeMPS.bin, "github.com/colocd/colocd/mps/internal/fakemps").CombinedOutput()
		if err != nil {
			fakeMPS.err = fmt.Errorf("%w: %s", err, out)
		}
	})
	if fakeMPS.err != nil {
		t.Fatalf("build the fake mps control binary: %v", fakeMPS.err)
	}
	return fakeMPS.bin
}

// mpsWorld is a sidecar on a simulated GPU with the fake control daemon,
// and worker processes that connect to it as MPS clients.
type mpsWorld struct {
	t         *testing.T
	bin, pipe string
	s         *running
	c         *bus.Client
}

func newMPSWorld(t *testing.T, deadline time.Duration) *mpsWorld {
	t.Helper()
	w := &mpsWorld{t: t, bin: fakeControl(t)}
	cfg := testConfig(t, "gpu-evict", p99At(t, 100)/0.9*1.05)
	dir := t.TempDir()
	w.pipe = filepath.Join(dir, "pipe")
	cfg.MPS.Control, cfg.MPS.PipeDir, cfg.MPS.LogDir = w.bin, w.pipe, filepath.Join(dir, "log")
	cfg.Admission.Guard.Deadline = deadline
	w.s = start(t, cfg, Options{})
	w.c = client(t, w.s)
	t.Cleanup(w.quitDaemon)
	return w
}

// quitDaemon quits the fake daemon and waits until its process is gone,
// so that it writes no log line into a directory the test is removing.
func (w *mpsWorld) quitDaemon() {
	pid := 0
	if b, err := os.ReadFile(filepath.Join(w.pipe, "nvidia-cuda-mps-control.pid")); err == nil {
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	_ = exec.Command("sh", "-c", "echo quit | CUDA_MPS_PIPE_DIRECTORY="+w.pipe+" "+w.bin).Run()
	for end := time.Now().Add(30 * time.Second); pid > 0 && processExists(pid) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
}

// worker starts a process with the lease's id in its environment (the
// grant's env; "" for a process of no lease) and connects it to the daemon
// as an MPS client.
func (w *mpsWorld) worker(lease string) int {
	w.t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), "COLOCD_LEASE_ID="+lease)
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	w.control(fmt.Sprintf("fake_client_connect %d %d train.py", pid, os.Getuid()))
	return pid
}

// control sends one line to the daemon, as a person at the shell would.
func (w *mpsWorld) control(line string) string {
	w.t.Helper()
	cmd := exec.Command(w.bin)
	cmd.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+w.pipe)
	cmd.Stdin = strings.NewReader(line + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("%s: %v: %s", line, err, out)
	}
	return string(out)
}

// commands is what the daemon was asked, one quoted command per line.
func (w *mpsWorld) commands() string {
	data, _ := os.ReadFile(filepath.Join(w.pipe, "fake-commands.log"))
	return string(data)
}

// throttle tightens the SLO so that the job runs at a lower percentage.
func (w *mpsWorld) throttle() {
	w.t.Helper()
	specs := slices.Clone(w.s.services()) // the sidecar's own is shared
	specs[0].SLOP99MS = (p99At(w.t, 10) + p99At(w.t, 100)) / 2 / 0.9
	if _, err := w.s.adm.UpdateServices(context.Background(), specs, 0.1); err != nil {
		w.t.Fatal(err)
	}
}

func nextBusEvent(t *testing.T, sub *bus.EventSubscription) v1.Event {
	t.Helper()
	select {
	case rec := <-sub.C():
		return rec.Event
	case <-time.After(60 * time.Second):
		t.Fatal("no event within 60 s")
		return v1.Event{}
	}
}

// A launcher that ignores a throttle is revoked at the deadline, and each
// of its registered processes is ended with terminate_client through the
// daemon (never a signal); a process that is not the job's (here the
// sidecar's own test binary, without the lease's id in its environment)
// cannot be registered, so it cannot be evicted. (A throttle the launcher
// honours is admission.TestThrottleHonouredKeepsTheLease.)
func TestThrottleIgnoredEvictsThroughTheDaemon(t *testing.T) {
	t.Parallel()
	w := newMPSWorld(t, 2*time.Second)
	ctx := context.Background()
	d := leased(ctx, t, w.c, w.s.ID(), admitReq("job-e", 10, 100))
	err := register(ctx, w.c, w.s.ID(), d.Lease, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), "COLOCD_LEASE_ID") {
		t.Fatalf("register of a process that is not the job's: %v, want a refusal", err)
	}
	time.Sleep(1100 * time.Millisecond) // past /proc's precision of the grant
	pids := []int{w.worker(d.Lease.ID), w.worker(d.Lease.ID)}
	if err := register(ctx, w.c, w.s.ID(), d.Lease, pids...); err != nil {
		t.Fatal(err)
	}
	sub, err := w.c.Events(ctx, w.s.ID(), "job-e", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	w.throttle()
	if ev := nextBusEvent(t, sub); ev.Type != v1.EventThrottle || ev.Env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != fmt.Sprint(ev.ActiveThreadPct) {
		t.Fatalf("event %+v, want a throttle with the new env", ev)
	}
	if ev := nextBusEvent(t, sub); ev.Type != v1.EventRevoke {
		t.Fatalf("event %+v, want a revoke at the deadline", ev)
	}
	if ev := nextBusEvent(t, sub); ev.Type != v1.EventExpire {
		t.Fatalf("event %+v, want the lease's expire", ev)
	}
	log := w.commands()
	for _, pid := range pids {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^"terminate_client [0-9]+ %d\\n"$`, pid)).MatchString(log) {
			t.Errorf("daemon commands do not end process %d with terminate_client:\n%s", pid, log)
		}
	}
	if strings.Contains(log, fmt.Sprint(os.Getpid())) {
		t.Errorf("the daemon was asked about a process that is not the job's:\n%s", log)
	}
	if ps := w.control("ps"); strings.Contains(ps, fmt.Sprint(pids[0])) || strings.Contains(ps, fmt.Sprint(pids[1])) {
		t.Errorf("clients still connected after eviction:\n%s", ps)
	}
	if ls := w.s.adm.Leases(); len(ls) != 0 {
		t.Errorf("leases %+v after eviction", ls)
	}
}

// An MPS server in FAULT revokes every training lease at once and ends
// each job's processes through the daemon; the inference server's client
// is never touched, and nothing is admitted until the fault clears.
func TestMPSFaultRevokesEveryLease(t *testing.T) {
	t.Parallel()
	w := newMPSWorld(t, time.Hour)
	ctx := context.Background()
	inference := w.worker("") // started before any lease: the inference server
	d := leased(ctx, t, w.c, w.s.ID(), admitReq("job-f", 10, 100))
	time.Sleep(1100 * time.Millisecond)
	job := w.worker(d.Lease.ID)
	if err := register(ctx, w.c, w.s.ID(), d.Lease, job); err != nil {
		t.Fatal(err)
	}
	sub, err := w.c.Events(ctx, w.s.ID(), "job-f", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	if err := os.WriteFile(filepath.Join(w.pipe, "fake-fault"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := nextBusEvent(t, sub); ev.Type != v1.EventRevoke || !strings.Contains(ev.Reason, "FAULT") {
		t.Fatalf("event %+v, want a revoke for the fault", ev)
	}
	if ev := nextBusEvent(t, sub); ev.Type != v1.EventExpire {
		t.Fatalf("event %+v, want the lease's expire", ev)
	}
	log := w.commands()
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^"terminate_client [0-9]+ %d\\n"$`, job)).MatchString(log) {
		t.Errorf("the job's process was not terminated:\n%s", log)
	}
	if regexp.MustCompile(fmt.Sprintf(`terminate_client [0-9]+ %d\\n`, inference)).MatchString(log) {
		t.Errorf("the inference server's client was terminated:\n%s", log)
	}
	if _, err := w.c.Admit(ctx, w.s.ID(), admitReq("job-g", 10, 100)); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("admit during the fault: %v, want a 503", err)
	}
}
