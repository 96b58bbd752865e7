package main

import (
	"errors"
	"fmt"
)

// Exit statuses (docs/cli.md#exit-status): a launcher's script tells "no
// slot now, try later" from "something is broken".
const (
	exitOK     = 0
	exitError  = 1 // something failed: a sidecar refused the request, no sidecar answered, a file, a field
	exitUsage  = 2 // the command line does not parse: an unknown command or flag, a bad flag value, too many arguments
	exitDenied = 3 // admit or place: the answer is no (a deny, or no GPU of the fleet would take the job)
)

// usageError is a command line that does not parse.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// deniedError is an admission answered with no.
type deniedError struct{ err error }

func (e deniedError) Error() string { return e.err.Error() }
func (e deniedError) Unwrap() error { return e.err }

// statusError ends colocd with a given status: colocd run's, which is
// its command's (or 128+N after signal N, 69 lease lost, 75 revoked). With
// no err nothing more is printed: run has said what happened.
type statusError struct {
	code int
	err  error
}

func (e statusError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e statusError) Unwrap() error { return e.err }

// silent reports whether err needs no line of its own on stderr.
func silent(err error) bool {
	var s statusError
	return errors.As(err, &s) && s.err == nil
}

// exitCode is the exit status for what run returned.
func exitCode(err error) int {
	var (
		u usageError
		d deniedError
		s statusError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &s):
		return s.code
	case errors.As(err, &u):
		return exitUsage
	case errors.As(err, &d):
		return exitDenied
	}
	return exitError
}
