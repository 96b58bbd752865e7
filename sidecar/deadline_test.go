package sidecar

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
)

// TestBusErrorCodes: what the admission controller's errors become on the
// wire; a deadline is a 504 before anything else, so a lease store call that
// ran out of the caller's time is not reported as an unhealthy store.
func TestBusErrorCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"timeout", fmt.Errorf("decide: %w: no decision in time", admission.ErrTimeout), v1.CodeTimeout},
		{"store call past the deadline", fmt.Errorf("renew: %w: lease store: %w", admission.ErrUnavailable, context.DeadlineExceeded), v1.CodeTimeout},
		{"unavailable", fmt.Errorf("%w: the GPU is unhealthy", admission.ErrUnavailable), v1.CodeUnavailable},
		{"invalid", fmt.Errorf("request: %w", admission.ErrInvalid), v1.CodeBadRequest},
		{"conflict", admission.ErrRequestIDReused, v1.CodeConflict},
		{"a bus error stays", v1.NotFound("profile_ref"), v1.CodeNotFound},
		{"other", errors.New("boom"), v1.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := v1.CodeOf(busError(tt.err)); got != tt.want {
				t.Errorf("code %d, want %d", got, tt.want)
			}
		})
	}
}

// TestFirstTermOverNATS: a grant lives for admission.lease.first_term until
// the launcher renews it; then it has the length it asked for.
func TestFirstTermOverNATS(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-a", 1000)
	cfg.Admission.Lease.FirstTerm = 30 * time.Second
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx := context.Background()
	req := admitReq("job-first", 10, 100)
	req.LeaseSeconds = 600
	// Each term counts from when the call was served, somewhere between
	// the moment it was sent and the moment its answer came: however long
	// a loaded machine takes, the expiry lies in that window.
	within := func(what string, expires, sent, answered time.Time, term time.Duration) {
		t.Helper()
		if expires.Before(sent.Add(term)) || expires.After(answered.Add(term)) {
			t.Errorf("%s until %s, want %s after a moment in [%s, %s]", what, expires.Format(time.RFC3339Nano), term,
				sent.Format(time.RFC3339Nano), answered.Format(time.RFC3339Nano))
		}
	}
	sent := time.Now().Truncate(time.Second) // the wire's times have whole seconds at least
	d := leased(ctx, t, c, s.ID(), req)
	within("granted", d.Lease.ExpiresAt, sent, time.Now().Add(time.Second), 30*time.Second)
	sent = time.Now().Truncate(time.Second)
	l, err := c.Renew(ctx, s.ID(), &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token})
	if err != nil {
		t.Fatal(err)
	}
	within("renewed", l.ExpiresAt, sent, time.Now().Add(time.Second), 600*time.Second)
}
