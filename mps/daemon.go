package mps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// PIDFile is the file in the pipe directory in which the control daemon
// writes its PID.
const PIDFile = "nvidia-cuda-mps-control.pid"

// ownerFile is colocd's marker in the pipe directory: the PID of a daemon
// that colocd started, so that a restarted colocd still restarts it when it
// dies (but never quits it).
const ownerFile = "colocd.owner"

// daemonProcess reads the PID file and reports whether that daemon is alive;
// why says what is wrong when it is not.
func (c *Control) daemonProcess() (pid PID, alive bool, why string) {
	data, err := os.ReadFile(filepath.Join(c.cfg.PipeDir, PIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, "no pid file in " + c.cfg.PipeDir
	}
	if err != nil {
		return 0, false, err.Error()
	}
	if pid, err = parsePIDFile(string(data)); err != nil {
		return 0, false, err.Error()
	}
	c.mu.Lock()
	reaped := c.reaped
	ours := pid == c.daemon
	c.mu.Unlock()
	if reaped != nil && ours {
		select {
		case <-reaped:
			return pid, false, fmt.Sprintf("daemon %d exited", pid)
		default:
		}
	}
	alive, why = processAlive(pid, c.cfg.Binary)
	return pid, alive, why
}

// Ensure makes sure a control daemon serves the pipe directory: it attaches
// to a running one (its PID file names a live daemon that answers a probe) or,
// with Manage, starts one and waits for it to answer. Then it applies the
// configured defaults. Health records whether colocd started the daemon.
func (c *Control) Ensure(ctx context.Context) error {
	c.startMu.Lock()
	defer c.startMu.Unlock()
	pid, alive, why := c.daemonProcess()
	how := "attached to"
	if alive {
		if _, err := c.serverPIDs(ctx, c.cfg.ProbeTimeout); err != nil {
			return fmt.Errorf("attach daemon %d: %w", pid, err)
		}
		owner, _ := readOwner(c.cfg.PipeDir)
		c.mu.Lock()
		c.started = c.started && c.daemon == pid
		c.owned = c.started || owner == pid
		c.daemon = pid
		c.mu.Unlock()
	} else {
		if !c.cfg.Manage {
			return fmt.Errorf("attach daemon: %w: %s", ErrNotRunning, why)
		}
		var err error
		if pid, err = c.start(ctx); err != nil {
			return err
		}
		how = "started"
	}
	if err := c.applyDefaults(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	c.closing, c.restartErr = false, nil
	for _, t := range c.tails {
		t.skipToEnd()
	}
	c.mu.Unlock()
	c.health.set(c.snapshot(StateReady, fmt.Sprintf("%s daemon %d", how, pid), nil))
	return nil
}

// start starts a daemon (-d, or -f as a supervised child), waits for it to
// answer and marks it as colocd's. The caller holds startMu.
func (c *Control) start(ctx context.Context) (PID, error) {
	for _, dir := range []string{c.cfg.PipeDir, c.cfg.LogDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, fmt.Errorf("start daemon: %w", err)
		}
	}
	var reaped chan struct{}
	var exitErr error
	if c.cfg.Supervise {
		p := exec.Command(c.cfg.Binary, "-f")
		p.Env = c.daemonEnv
		// Its own process group: a signal to colocd's group (Ctrl-C, a
		// terminal hang-up) does not reach the daemon.
		p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := p.Start(); err != nil {
			return 0, fmt.Errorf("start daemon: %w", err)
		}
		reaped = make(chan struct{})
		go func() {
			// Reaps the child. It ends when the daemon exits.
			exitErr = p.Wait()
			close(reaped)
		}()
		c.mu.Lock()
		prev := c.daemon
		c.reaped, c.daemon = reaped, PID(p.Process.Pid)
		c.mu.Unlock()
		defer func() {
			if !c.startedPID(PID(p.Process.Pid)) {
				c.mu.Lock()
				c.daemon = prev // a child that never became the daemon
				c.mu.Unlock()
			}
		}()
	} else {
		_, _, err := runProcess(ctx, c.cfg.CommandTimeout, c.cfg.Binary, []string{"-d"}, c.daemonEnv, "")
		if err != nil {
			return 0, fmt.Errorf("start daemon: %w", err)
		}
		c.mu.Lock()
		c.reaped = nil
		c.mu.Unlock()
	}
	pid, err := c.waitReady(ctx, reaped, &exitErr)
	if err != nil {
		return 0, fmt.Errorf("start daemon: %w", err)
	}
	if err := writeOwner(c.cfg.PipeDir, pid); err != nil {
		return 0, fmt.Errorf("start daemon: %w", err)
	}
	c.mu.Lock()
	c.daemon, c.started, c.owned = pid, true, true
	c.mu.Unlock()
	return pid, nil
}

// startedPID reports whether pid is the daemon this colocd started.
func (c *Control) startedPID(pid PID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started && c.daemon == pid
}

// waitReady polls, with backoff, until the PID file names a live daemon that
// answers get_server_list, for at most StartTimeout. A supervised child that
// exits ends the wait at once.
func (c *Control) waitReady(ctx context.Context, reaped chan struct{}, exitErr *error) (PID, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	delay := 20 * time.Millisecond
	var last error
	for {
		pid, alive, why := c.daemonProcess()
		last = errors.New(why)
		if alive {
			if _, last = c.serverPIDs(ctx, c.cfg.ProbeTimeout); last == nil {
				return pid, nil
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("daemon not ready after %v: %w", c.cfg.StartTimeout, last)
		case <-reaped:
			t.Stop()
			return 0, fmt.Errorf("daemon exited: %v", *exitErr)
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// applyDefaults sets the configured defaults on the daemon.
func (c *Control) applyDefaults(ctx context.Context) error {
	d := c.cfg.Defaults
	if d.ActiveThreadPct != 0 {
		if err := c.SetDefaultActiveThreadPercentage(ctx, d.ActiveThreadPct); err != nil {
			return fmt.Errorf("apply defaults: %w", err)
		}
	}
	if d.PinnedMemLimit != 0 {
		if err := c.SetDefaultDevicePinnedMemLimit(ctx, c.cfg.defaultDevice(), d.PinnedMemLimit); err != nil {
			return fmt.Errorf("apply defaults: %w", err)
		}
	}
	if d.ClientPriority != nil {
		if err := c.SetDefaultClientPriority(ctx, *d.ClientPriority); err != nil {
			return fmt.Errorf("apply defaults: %w", err)
		}
	}
	return nil
}

// Close ends colocd's use of the daemon. It never quits a daemon this colocd
// did not start, and quits one it started only with QuitOnClose, then waits
// (bounded by ctx) for it to exit. After Close the health loop restarts
// nothing.
func (c *Control) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closing = true
	started, reaped, daemon := c.started, c.reaped, c.daemon
	c.mu.Unlock()
	if !started || !c.cfg.QuitOnClose {
		return nil
	}
	if err := c.Quit(ctx); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if reaped != nil {
		select {
		case <-reaped:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("close: wait for daemon %d: %w", daemon, ctx.Err())
		}
	}
	for {
		if alive, _ := processAlive(daemon, c.cfg.Binary); !alive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("close: wait for daemon %d: %w", daemon, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func writeOwner(dir string, pid PID) error {
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(int(pid))+"\n"), 0o644); err != nil {
		return fmt.Errorf("write owner marker: %w", err)
	}
	return nil
}

func readOwner(dir string) (PID, error) {
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return 0, err
	}
	return parsePIDFile(string(data))
}

// removeOwner removes the marker if it still names pid.
func removeOwner(dir string, pid PID) {
	if p, err := readOwner(dir); err == nil && p == pid {
		_ = os.Remove(filepath.Join(dir, ownerFile))
	}
}
