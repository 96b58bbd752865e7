package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
)

// Exit statuses of run besides the command's own (docs/cli.md#exit-status).
const (
	// ExitDenied: no slot; the command never started (as colocd admit).
	ExitDenied = 3
	// ExitLeaseLost: the lease could not be renewed, or expired, and the
	// command was stopped before it would run past it (sysexits
	// EX_UNAVAILABLE).
	ExitLeaseLost = 69
	// ExitRevoked: the sidecar revoked the lease and the command was
	// stopped (sysexits EX_TEMPFAIL: run it again later).
	ExitRevoked = 75
)

// Client is the part of the NATS API a supervisor uses; *bus.Client is one.
type Client interface {
	Renew(ctx context.Context, sidecarID string, ref *v1.LeaseRef) (*v1.Lease, error)
	Release(ctx context.Context, sidecarID string, ref *v1.LeaseRef) error
	Register(ctx context.Context, sidecarID string, req *v1.RegisterRequest) error
	Events(ctx context.Context, sidecarID, jobID string, fromSeq uint64) (*bus.EventSubscription, error)
}

var _ Client = (*bus.Client)(nil)

// Grant is what an Admitter got: the sidecar that answered and its
// decision (a deny too).
type Grant struct {
	Sidecar  string
	Decision *v1.Decision
}

// Admitter asks for a lease once: an admit at one sidecar, or a placement
// on the fleet. Each call is a new request (a new request id and token):
// a deny is remembered under its request id.
type Admitter func(ctx context.Context) (*Grant, error)

// Action is what a throttle (or a raise that is taken) does to the
// command: Restart stops it (SIGTERM, then SIGKILL after the grace) and
// starts it again; a Signal action sends the signal and waits for the
// command to exit by itself (it checkpoints), then starts it again.
type Action struct {
	Signal syscall.Signal // 0: restart
}

// ParseAction parses --on-throttle: "restart", or "signal:SIGUSR1" (or
// "signal:USR1", or a number).
func ParseAction(s string) (Action, error) {
	if s == "restart" {
		return Action{}, nil
	}
	name, ok := strings.CutPrefix(s, "signal:")
	if !ok {
		return Action{}, fmt.Errorf("want restart or signal:NAME (e.g. signal:SIGUSR1), got %q", s)
	}
	sig, err := ParseSignal(name)
	if err != nil {
		return Action{}, err
	}
	return Action{Signal: sig}, nil
}

// String is the action as --on-throttle takes it.
func (a Action) String() string {
	if a.Signal == 0 {
		return "restart"
	}
	return "signal:" + signalName(a.Signal)
}

var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM, "ALRM": syscall.SIGALRM, "CONT": syscall.SIGCONT,
	"WINCH": syscall.SIGWINCH, "PWR": syscall.SIGPWR, "XCPU": syscall.SIGXCPU,
}

// ParseSignal parses a signal name (SIGUSR1 or USR1) or number. SIGKILL
// and SIGSTOP are refused: a command cannot act on them.
func ParseSignal(s string) (syscall.Signal, error) {
	up := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if sig, ok := signals[up]; ok {
		return sig, nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		if n >= 1 && n <= 64 && n != int(syscall.SIGKILL) && n != int(syscall.SIGSTOP) {
			return syscall.Signal(n), nil
		}
	}
	return 0, fmt.Errorf("want a signal a command can handle (SIGUSR1, SIGTERM, SIGINT, SIGHUP, … or its number), got %q", s)
}

func signalName(sig syscall.Signal) string {
	for n, s := range signals {
		if s == sig {
			return "SIG" + n
		}
	}
	return fmt.Sprint(int(sig))
}

// Config is what a supervisor runs and how.
type Config struct {
	// Command is the program and its arguments.
	Command []string
	// Env is the environment the command starts from (os.Environ()); the
	// lease's variables replace any of the same name, every other
	// CUDA_MPS_* and COLOCD_LEASE_* is dropped, and the lease token is
	// never passed unless PassToken.
	Env       []string
	PassToken bool
	Dir       string
	Stdin     io.Reader
	Stdout    io.Writer
	Stderr    io.Writer

	// OnThrottle is what a throttle does; Grace how long a stopped command
	// gets between SIGTERM (or the Signal action) and SIGKILL, within the
	// event's deadline (default 30 s).
	OnThrottle Action
	Grace      time.Duration
	// TakeRaises restarts the command at a raise's higher percentage; by
	// default a raise is reported and ignored.
	TakeRaises bool
	// Readmit asks for a new lease after a revoke or a lost lease instead
	// of exiting with ExitRevoked or ExitLeaseLost.
	Readmit bool
	// WaitForSlot, when above 0, asks again after a deny (or a 503) with
	// backoff and jitter until granted or that long has passed.
	WaitForSlot time.Duration
	// RegisterEvery is how often the command's processes are read again
	// and, when they changed, registered (default 2 s).
	RegisterEvery time.Duration
	// Processes is how many processes the lease was admitted with: at most
	// that many are registered (0: up to bus.MaxRegisterPIDs).
	Processes int
	// Log receives one line per event (stderr); JSON makes them JSON.
	Log  io.Writer
	JSON bool
	// OnRecord, when set, sees every record (tests, metrics).
	OnRecord func(Record)

	// backoff is the first pause before asking again (default 2 s).
	backoff time.Duration
}

// Defaults of Config.
const (
	DefaultGrace         = 30 * time.Second
	DefaultRegisterEvery = 2 * time.Second
	// maxRegisterPIDs is the most process ids one register takes.
	maxRegisterPIDs = 48
)

func (c *Config) fill() error {
	if len(c.Command) == 0 || c.Command[0] == "" {
		return errors.New("command: want the program to run after --")
	}
	if c.Grace < 0 {
		return fmt.Errorf("grace: want a duration ≥ 0, got %s", c.Grace)
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.RegisterEvery <= 0 {
		c.RegisterEvery = DefaultRegisterEvery
	}
	if c.WaitForSlot < 0 {
		return fmt.Errorf("wait-for-slot: want a duration ≥ 0, got %s", c.WaitForSlot)
	}
	if c.Processes <= 0 || c.Processes > maxRegisterPIDs {
		c.Processes = maxRegisterPIDs
	}
	if c.backoff <= 0 {
		c.backoff = 2 * time.Second
	}
	return nil
}
