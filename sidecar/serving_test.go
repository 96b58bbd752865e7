package sidecar

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestServingHealth(t *testing.T) {
	t.Parallel()
	var h servingHealth
	now := time.Unix(1000, 0)
	boom := errors.New("predict: boom")
	for range failedAdmitsNotReady - 1 {
		h.admitted(500, boom, now)
	}
	if err := h.checkAdmits(now); err != nil {
		t.Errorf("after %d failures: %v, want ready", failedAdmitsNotReady-1, err)
	}
	h.admitted(504, boom, now)
	if err := h.checkAdmits(now); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("after %d failures: %v, want not ready with the last error", failedAdmitsNotReady, err)
	}
	if err := h.checkAdmits(now.Add(servingMemory)); err != nil {
		t.Errorf("long after the failures, with no admit since: %v, want ready", err)
	}
	h.admitted(0, nil, now)
	if err := h.checkAdmits(now); err != nil {
		t.Errorf("after a decision: %v, want ready", err)
	}
	h.admitted(503, boom, now) // its component's check says why
	if h.failedAdmits != 0 {
		t.Errorf("a 503 counted as a failure")
	}

	h.wrote(errors.New("jetstream: insufficient resources"), now)
	if err := h.checkWrites(now); err == nil || !strings.Contains(err.Error(), "insufficient") {
		t.Errorf("after a failed write: %v, want not ready", err)
	}
	h.wrote(nil, now)
	if err := h.checkWrites(now); err != nil {
		t.Errorf("after a write that succeeded: %v, want ready", err)
	}
}
