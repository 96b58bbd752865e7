package mps

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// Health returns the daemon's health at the last probe (or Ensure).
func (c *Control) Health() Health { return c.health.get() }

// Subscribe returns a channel that receives the Health each time its State
// changes, and a function that ends the subscription and closes the channel.
// A subscriber that falls behind loses the oldest events, never the newest.
func (c *Control) Subscribe() (<-chan Health, func()) { return c.health.subscribe() }

// Run probes the daemon every ProbeInterval until ctx ends, keeping Health
// current: daemon alive, get_server_list answered within ProbeTimeout, every
// server's status, and new fault lines in control.log and server.log. A
// daemon that colocd started and that died is restarted with backoff, and
// the defaults are applied again. Run returns nil when ctx ends.
func (c *Control) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.ProbeInterval)
	defer t.Stop()
	for {
		h := c.check(ctx)
		if ctx.Err() != nil {
			return nil // a probe cut short by shutdown says nothing
		}
		c.report(h)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// report records h and logs a change of state. Only Run's goroutine calls it.
func (c *Control) report(h Health) {
	if prev, changed := c.health.set(h); changed {
		level := c.log.Info
		if h.State != StateReady {
			level = c.log.Warn
		}
		level("mps health changed", "from", prev.State, "to", h.State, "reason", h.Reason, "daemon", int(h.Daemon))
	}
}

// check probes the daemon once.
func (c *Control) check(ctx context.Context) Health {
	pid, alive, why := c.daemonProcess()
	note := ""
	if !alive {
		var h Health
		if pid, h = c.recover(ctx, why); pid == 0 {
			return h
		}
		note = h.Reason + "; "
	}
	c.observe(pid)
	servers, err := c.serverPIDs(ctx, c.cfg.ProbeTimeout)
	if err != nil {
		return c.snapshot(stateFor(err), note+"probe: "+err.Error(), nil)
	}
	state, reason := StateReady, fmt.Sprintf("daemon %d answers; %d server(s)", pid, len(servers))
	var sh []ServerHealth
	for _, s := range servers {
		st, err := c.serverStatus(ctx, c.cfg.ProbeTimeout, s)
		if err != nil {
			return c.snapshot(stateFor(err), note+"probe: "+err.Error(), sh)
		}
		sh = append(sh, ServerHealth{PID: s, State: st, UID: c.serverUID(s)})
		if st == ServerFault && state == StateReady {
			state, reason = StateFault, fmt.Sprintf("server %d reports FAULT", s)
		}
	}
	if file, line := c.faultLine(); line != "" && state == StateReady {
		state, reason = StateFault, fmt.Sprintf("%s: %s", file, quote(line))
	}
	return c.snapshot(state, note+reason, sh)
}

// faultLine reads the new lines of the logs and returns the first fault
// line and its file's name.
func (c *Control) faultLine() (file, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.tails {
		for _, l := range t.newLines() {
			if line == "" && isFaultLine(l) {
				file, line = filepath.Base(t.path), l
			}
		}
	}
	return file, line
}

// recover handles a daemon that is not running. With Manage and before
// Close, colocd restarts one it owns, or starts one if it never saw any
// (an Ensure that failed at boot), once the backoff allows; otherwise the
// daemon is reported down. It returns the PID of the running daemon, or 0
// with the Health to report. Until a daemon runs again, every reason it
// gives names the last failed restart: the probe after a failure must not
// hide why the daemon is still down.
func (c *Control) recover(ctx context.Context, why string) (PID, Health) {
	c.mu.Lock()
	owned, closing, next, backoff := c.owned, c.closing, c.nextRestart, c.backoff
	failed := ""
	if c.restartErr != nil {
		failed = fmt.Sprintf("; last restart failed: %v", c.restartErr)
	}
	if c.daemon == 0 && c.cfg.Manage {
		owned = true // nobody's daemon yet: starting one is Ensure's job, done late
	}
	c.mu.Unlock()
	down := "daemon not running: " + why
	switch {
	case !owned:
		return 0, c.snapshot(StateDown, down+" (not started by colocd: not restarted)", nil)
	case !c.cfg.Manage || closing:
		return 0, c.snapshot(StateDown, down+failed, nil)
	case time.Now().Before(next):
		return 0, c.snapshot(StateDown, fmt.Sprintf("%s; next restart in %v%s", down, time.Until(next).Round(time.Millisecond), failed), nil)
	}
	// Say so before restarting: the daemon's clients, the inference server's
	// included, lost it, and a restart takes time.
	c.report(c.snapshot(StateDown, down+"; starting it"+failed, nil))
	c.startMu.Lock()
	pid, alive, _ := c.daemonProcess() // Ensure may have started it meanwhile
	if alive {
		c.startMu.Unlock()
		return pid, Health{Reason: fmt.Sprintf("daemon %d came back", pid)}
	}
	pid, err := c.start(ctx)
	if err == nil {
		err = c.applyDefaults(ctx)
	}
	c.startMu.Unlock()
	if err != nil {
		c.mu.Lock()
		c.nextRestart = time.Now().Add(backoff)
		c.backoff = min(2*backoff, c.cfg.MaxRestartBackoff)
		c.restartErr = err
		c.mu.Unlock()
		if ctx.Err() == nil {
			c.log.Warn("mps daemon restart failed", "err", err, "retry_in", backoff)
		}
		return 0, c.snapshot(StateDown, fmt.Sprintf("%s; restart failed: %v", down, err), nil)
	}
	c.mu.Lock()
	c.backoff, c.nextRestart = c.cfg.RestartBackoff, time.Time{}
	c.mu.Unlock()
	c.log.Info("mps daemon restarted", "daemon", int(pid), "after", why)
	return pid, Health{Reason: fmt.Sprintf("restarted daemon %d (%s)", pid, why)}
}

// observe records the running daemon's PID. A daemon that is not the one
// colocd last saw was restarted by someone else: colocd did not start it,
// and owns it only if the owner marker names it. A running daemon makes a
// failed restart history.
func (c *Control) observe(pid PID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restartErr = nil
	if c.daemon == pid {
		return
	}
	owner, _ := readOwner(c.cfg.PipeDir)
	c.daemon, c.started, c.owned = pid, false, owner == pid
}

// stateFor maps a probe error to a state: output colocd cannot read is
// unknown; a timeout or a failed run is unresponsive.
func stateFor(err error) State {
	if errors.Is(err, ErrUnexpectedOutput) {
		return StateUnknown
	}
	return StateUnresponsive
}

// snapshot builds a Health with the daemon's identity.
func (c *Control) snapshot(s State, reason string, servers []ServerHealth) Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Health{State: s, Reason: reason, Daemon: c.daemon, Started: c.started, Owned: c.owned, Servers: servers}
}
