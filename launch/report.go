package launch

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Record is one line of what run did: printed on stderr as a sentence, or
// with JSON as one object a line.
type Record struct {
	Time time.Time `json:"time"`
	// Event is what happened: admitted, waiting, started, registered,
	// renewed, renew_failed, throttled, raised, raise_ignored, restarted,
	// revoked, expired, lease_lost, stopping, exited, released,
	// release_failed, readmitting, interrupted.
	Event   string `json:"event"`
	Sidecar string `json:"sidecar,omitempty"`
	LeaseID string `json:"lease_id,omitempty"`
	// Pct is the active-thread percentage the command runs (or will run)
	// at; FromPct the one before a throttle or raise.
	Pct     int `json:"pct,omitempty"`
	FromPct int `json:"from_pct,omitempty"`
	// Deadline is a throttle's or revoke's, ExpiresAt the lease's.
	Deadline  *time.Time `json:"deadline,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	PIDs      []int      `json:"pids,omitempty"`
	// Restarts counts the command's restarts so far.
	Restarts int `json:"restarts"`
	// Status is the command's exit status (exited) or run's (released).
	Status *int `json:"status,omitempty"`
	// Seconds is how long the step took: from a throttle's event to the
	// restarted command registered, from the command's exit to the release.
	Seconds *float64 `json:"seconds,omitempty"`
	Message string   `json:"message"`
}

// reporter writes records, safely from several goroutines.
type reporter struct {
	mu     sync.Mutex
	w      io.Writer
	asJSON bool
	hook   func(Record)
}

func (r *reporter) emit(rec Record) {
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	rec.Time = rec.Time.UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hook != nil {
		r.hook(rec)
	}
	if r.w == nil {
		return
	}
	if r.asJSON {
		b, err := json.Marshal(rec)
		if err == nil {
			_, _ = r.w.Write(append(b, '\n'))
		}
		return
	}
	_, _ = fmt.Fprintf(r.w, "colocd run: %s\n", oneLine(rec.Message))
}

// oneLine keeps a message on one line: a sidecar's reason can hold
// anything.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || (r < 0x20 && r != '\t') || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// until says how far t is from now, rounded for a person.
func until(t time.Time) string {
	d := time.Until(t)
	switch {
	case d <= 0:
		return "now"
	case d < time.Minute:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}
