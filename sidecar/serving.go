package sidecar

import (
	"fmt"
	"sync"
	"time"
)

// servingHealth is what /readyz learns from the requests themselves,
// beside the components' own checks: a sidecar whose every admit fails,
// or whose lease writes fail, cannot serve, whatever its parts say.
type servingHealth struct {
	mu sync.Mutex
	// failedAdmits counts the admits in a row answered with a 500 or a
	// 504 (a 503 has its component's own check); lastAdmitErr is the last.
	failedAdmits int
	lastAdmitErr string
	lastAdmitAt  time.Time
	// writeErr is the last lease write's failure, cleared by a write that
	// succeeds; writeAt is when it failed.
	writeErr string
	writeAt  time.Time
}

// Bounds of servingHealth's checks.
const (
	// failedAdmitsNotReady admits failing in a row make the sidecar not
	// ready.
	failedAdmitsNotReady = 8
	// servingMemory is how long a failure is held against readiness
	// without a new request to confirm or clear it.
	servingMemory = 2 * time.Minute
)

// admitted records an admit's answer: its code (0 for a decision).
func (h *servingHealth) admitted(code int, err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if code == 500 || code == 504 {
		h.failedAdmits++
		h.lastAdmitErr, h.lastAdmitAt = err.Error(), now
		return
	}
	h.failedAdmits = 0
}

// wrote records a lease write's outcome (nil: it succeeded).
func (h *servingHealth) wrote(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.writeErr = ""
		return
	}
	h.writeErr, h.writeAt = err.Error(), now
}

// checkAdmits is /readyz's "admits": not ready after failedAdmitsNotReady
// failures in a row, the last within servingMemory.
func (h *servingHealth) checkAdmits(now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failedAdmits >= failedAdmitsNotReady && now.Sub(h.lastAdmitAt) < servingMemory {
		return fmt.Errorf("the last %d admits failed (500 or 504), the last at %s: %s", h.failedAdmits, h.lastAdmitAt.UTC().Format(time.TimeOnly), clipReason(h.lastAdmitErr))
	}
	return nil
}

// checkWrites is /readyz's "store writes": not ready while the last lease
// write failed (within servingMemory) and none has succeeded since.
func (h *servingHealth) checkWrites(now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.writeErr != "" && now.Sub(h.writeAt) < servingMemory {
		return fmt.Errorf("the last lease write failed at %s: %s", h.writeAt.UTC().Format(time.TimeOnly), clipReason(h.writeErr))
	}
	return nil
}

// clipReason keeps a reason short enough for a probe's answer.
func clipReason(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
