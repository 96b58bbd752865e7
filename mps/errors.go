package mps

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/colocd/colocd/field"
)

// Sentinel errors that callers branch on (errors.Is).
var (
	// ErrInvalidArgument is wrapped by every error about a parameter that
	// failed validation. No command runs when it is returned.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTimeout means a control command did not finish within its timeout;
	// its process group was killed.
	ErrTimeout = errors.New("control command timed out")
	// ErrNotRunning means no control daemon runs for the pipe directory.
	ErrNotRunning = errors.New("mps control daemon not running")
	// ErrNotStarted is returned by Quit for a daemon that this colocd did not
	// start: colocd never quits a daemon it did not start.
	ErrNotStarted = errors.New("mps control daemon not started by colocd")
	// ErrUnexpectedOutput is wrapped by OutputError: the daemon answered with
	// text colocd does not understand, which includes the daemon's own error
	// messages.
	ErrUnexpectedOutput = errors.New("unexpected output")
	// ErrTerminateFailed means terminate_client answered a CUDA error code.
	ErrTerminateFailed = errors.New("terminate client failed")
	// ErrCommandFailed means the control binary exited with a non-zero status.
	ErrCommandFailed = errors.New("control command failed")
	// ErrUnknownClient and ErrUnknownServer are returned by Sim for a PID
	// that it does not know.
	ErrUnknownClient = errors.New("unknown client")
	ErrUnknownServer = errors.New("unknown server")
	// ErrServerNotReady is returned by Sim.AddClient while the server is in
	// FAULT, as the real daemon refuses new clients then.
	ErrServerNotReady = errors.New("mps server not ready")
)

// maxQuoted bounds how much of an answer an error quotes.
const maxQuoted = 256

// OutputError is an answer that does not have the shape its command
// promises. It quotes the answer so that an operator sees what the daemon
// said.
type OutputError struct {
	Command string // the command verb, e.g. "ps"
	Output  string // the answer (possibly long; Error quotes a prefix)
	Reason  string // what was wrong, e.g. "line 2: want a PID"
}

// Error says which command answered what, and why that is wrong.
func (e *OutputError) Error() string {
	return fmt.Sprintf("unexpected output from %s: %s: %s", e.Command, e.Reason, quote(e.Output))
}

// Unwrap makes errors.Is(err, ErrUnexpectedOutput) true.
func (e *OutputError) Unwrap() error { return ErrUnexpectedOutput }

// quote returns s as a Go string literal, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "…"
	}
	return strconv.Quote(s)
}

// invalid builds an ErrInvalidArgument error naming the parameter: the
// field-error list every colocd input reports.
func invalid(param, want string, got any) error {
	var c field.Checker
	c.Add(param, want, quote(fmt.Sprint(got)))
	return c.ErrKind("argument", ErrInvalidArgument)
}
