package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is one run of the command, in its own process group.
type child struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	done    chan struct{} // closed when the command has exited
	status  int           // its exit status (128+N when killed by signal N), once done
	err     error         // why Wait failed, if it did
}

// startChild starts argv with env in a new process group whose id is the
// child's PID, so that a signal to -pid reaches its workers too.
func startChild(argv, env []string, dir string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	// Its own group, and SIGKILL if this process dies: a command must not
	// train on past the lease that its supervisor no longer renews.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	c := &child{cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		c.status = exitStatus(cmd.ProcessState)
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			c.err = err
		}
		close(c.done)
	}()
	return c, nil
}

// exitStatus is a shell's view of how a process ended: its exit code, or
// 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signal sends sig to the child's whole process group.
func (c *child) signal(sig syscall.Signal) error {
	err := syscall.Kill(-c.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // nobody left in the group
	}
	return err
}

// groupAlive reports whether any process of the child's group still runs
// (a zombie leader counts until it is reaped).
func (c *child) groupAlive() bool {
	return syscall.Kill(-c.pid, 0) == nil
}

// exited reports whether the command has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop ends the command: first (unless first is 0) signal first to the
// group and wait up to grace for the command to exit, then SIGKILL the
// group; and once the command is gone, SIGKILL whatever of its group is
// left, so that no worker outlives it. It returns when the command has
// exited, or after a last wait of killWait.
func (c *child) stop(first syscall.Signal, grace time.Duration) {
	if first != 0 && !c.exited() {
		_ = c.signal(first)
		t := time.NewTimer(max(grace, 0))
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
	}
	_ = c.signal(syscall.SIGKILL)
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	_ = c.signal(syscall.SIGKILL) // stragglers that outlived the leader
}

// killWait bounds the wait for a SIGKILLed command to be reaped.
const killWait = 5 * time.Second
