package mps

import (
	"fmt"
	"strings"
)

// The verbs of the control protocol (NVIDIA MPS documentation, "Tools and
// Interface Reference").
const (
	verbGetServerList            = "get_server_list"
	verbGetServerStatus          = "get_server_status"
	verbGetClientList            = "get_client_list"
	verbPS                       = "ps"
	verbSetDefaultActiveThreads  = "set_default_active_thread_percentage"
	verbGetDefaultActiveThreads  = "get_default_active_thread_percentage"
	verbSetActiveThreads         = "set_active_thread_percentage"
	verbGetActiveThreads         = "get_active_thread_percentage"
	verbSetDefaultPinnedMemLimit = "set_default_device_pinned_mem_limit"
	verbGetDefaultPinnedMemLimit = "get_default_device_pinned_mem_limit"
	verbSetPinnedMemLimit        = "set_device_pinned_mem_limit"
	verbGetPinnedMemLimit        = "get_device_pinned_mem_limit"
	verbSetDefaultClientPriority = "set_default_client_priority"
	verbGetDefaultClientPriority = "get_default_client_priority"
	verbTerminateClient          = "terminate_client"
	verbShutdownServer           = "shutdown_server"
	verbStartServer              = "start_server"
	verbQuit                     = "quit"
)

// param is a validated value that can be written to the control pipe.
type param interface {
	Validate() error
	arg() string
}

// flag is a literal option of a command (-uid, -f, -p). Only constants of
// this package are flags.
type flag string

const (
	flagUID   flag = "-uid"
	flagForce flag = "-f"
	flagPID   flag = "-p"
)

func (f flag) Validate() error {
	switch f {
	case flagUID, flagForce, flagPID:
		return nil
	}
	return invalid("flag", "-uid, -f or -p", string(f))
}

func (f flag) arg() string { return string(f) }

// command is one line for the control pipe, built only from a verb constant
// and validated params.
type command struct {
	verb string
	args []string
}

// newCommand validates every param and builds the line. It is the only way
// to make a command; an error here means nothing runs.
func newCommand(verb string, params ...param) (command, error) {
	c := command{verb: verb}
	for _, p := range params {
		if err := p.Validate(); err != nil {
			return command{}, fmt.Errorf("build %s: %w", verb, err)
		}
		c.args = append(c.args, p.arg())
	}
	if line := c.line(); !safeLine(line) {
		// Unreachable with the params above; a last guard all the same.
		return command{}, fmt.Errorf("build %s: %w: unsafe characters in %s", verb, ErrInvalidArgument, quote(line))
	}
	return c, nil
}

// line is the text written to the control binary's stdin (without newline).
func (c command) line() string {
	if len(c.args) == 0 {
		return c.verb
	}
	return c.verb + " " + strings.Join(c.args, " ")
}

// safeLine reports whether line holds only letters, digits, '_', '-' and
// single spaces: no newline, no control character, nothing a shell or the
// daemon's command reader could read as a second command.
func safeLine(line string) bool {
	if line == "" || len(line) > 200 {
		return false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == ' ' && i > 0 && line[i-1] != ' ':
		default:
			return false
		}
	}
	return true
}
