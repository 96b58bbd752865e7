package mps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// maxOutput bounds what is kept of one command's stdout or stderr.
const maxOutput = 1 << 20

// runCommand runs the control binary once with cmd on stdin and returns its
// stdout. The process runs in its own process group, and the whole group is
// killed when timeout passes or ctx ends: a wedged daemon hangs its clients,
// and it must not hang colocd.
func (c *Control) runCommand(ctx context.Context, timeout time.Duration, cmd command) (string, error) {
	stdout, stderr, err := runProcess(ctx, timeout, c.cfg.Binary, nil, c.clientEnv, cmd.line()+"\n")
	if err != nil {
		return "", fmt.Errorf("run %s: %w", cmd.verb, err)
	}
	// Answers come on stdout; anything on stderr is kept with them so that
	// the parser rejects it and the error quotes it.
	return stdout + stderr, nil
}

// runProcess runs bin with args, env and stdin, killing its process group on
// timeout or cancellation. A non-zero exit wraps ErrCommandFailed and quotes
// the output.
func runProcess(ctx context.Context, timeout time.Duration, bin string, args, env []string, stdin string) (string, string, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := exec.CommandContext(ctx, bin, args...)
	p.Env = env
	p.Stdin = strings.NewReader(stdin)
	var stdout, stderr limitedBuffer
	p.Stdout = &stdout
	p.Stderr = &stderr
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.Cancel = func() error {
		// Negative PID: the whole process group, so that a child the
		// binary forked dies with it.
		return syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
	}
	// If a grandchild keeps stdout open after the kill, stop waiting for it.
	p.WaitDelay = time.Second
	err := p.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		// It exited with status 0, but a child it forked (the daemon of
		// -d) kept its output open: what was read is the answer.
		err = nil
	}
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), nil
	case parent.Err() != nil:
		return "", "", parent.Err()
	case ctx.Err() != nil:
		return "", "", fmt.Errorf("%w after %v", ErrTimeout, timeout)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		out := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
		return "", "", fmt.Errorf("%w: %v: %s", ErrCommandFailed, exit, quote(out))
	}
	return "", "", fmt.Errorf("%w: %v", ErrCommandFailed, err)
}

// limitedBuffer keeps the first maxOutput bytes written to it and drops the
// rest, so that a runaway answer cannot exhaust memory or block the child.
type limitedBuffer struct {
	b []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

// environ returns base without any CUDA_MPS_* or CUDA_VISIBLE_DEVICES
// variable, then the given ones: the daemon and its clients see exactly
// what colocd means, not what colocd's own environment happens to hold.
func environ(base []string, set ...string) []string {
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		if strings.HasPrefix(kv, "CUDA_MPS_") || strings.HasPrefix(kv, "CUDA_VISIBLE_DEVICES=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, set...)
}

// processAlive reports whether pid is a live (not zombie) process whose
// program is the control daemon, as far as /proc tells. A PID file can
// outlive its daemon, and the PID can be reused by another program.
func processAlive(pid PID, binary string) (bool, string) {
	if err := syscall.Kill(int(pid), 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false, fmt.Sprintf("pid %d is not running", pid)
	}
	proc := fmt.Sprintf("/proc/%d/", pid)
	if stat, err := os.ReadFile(proc + "stat"); err == nil {
		// The state follows the parenthesised command name.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false, fmt.Sprintf("pid %d has exited", pid)
		}
	}
	if cmdline, err := os.ReadFile(proc + "cmdline"); err == nil {
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		name := argv0[strings.LastIndexByte(argv0, '/')+1:]
		want := binary[strings.LastIndexByte(binary, '/')+1:]
		if name != want && !strings.Contains(name, "nvidia-cuda-mps-control") {
			return false, fmt.Sprintf("pid %d is another program (%s)", pid, quote(name))
		}
	}
	return true, ""
}
