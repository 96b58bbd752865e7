package sidecar

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
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
		{"timeout", fmt.Errorf("decide: %w: no decision in time", admission.ErrTimeout), bus.CodeTimeout},
		{"store call past the deadline", fmt.Errorf("renew: %w: lease store: %w", admission.ErrUnavailable, context.DeadlineExceeded), bus.CodeTimeout},
		{"unavailable", fmt.Errorf("%w: the GPU is unhealthy", admission.ErrUnavailable), bus.CodeUnavailable},
		{"invalid", fmt.Errorf("request: %w", admission.ErrInvalid), bus.CodeBadRequest},
		{"conflict", admission.ErrRequestIDReused, bus.CodeConflict},
		{"a bus error stays", bus.NotFound("profile_ref"), bus.CodeNotFound},
		{"other", errors.New("boom"), bus.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bus.CodeOf(busError(tt.err)); got != tt.want {
				t.Errorf("code %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAdmissionConfigDeadlineKeys(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-a", 1000)
	cfg.Admission.DecisionTimeout = 3 * time.Second
	cfg.Admission.Lease.FirstTerm = 45 * time.Second
	a := admissionConfig(cfg, nil, "")
	if a.DecisionTimeout != 3*time.Second || a.Lease.FirstTerm != 45*time.Second {
		t.Errorf("decision timeout %s, first term %s; want 3s and 45s", a.DecisionTimeout, a.Lease.FirstTerm)
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
	asked := time.Now()
	d, err := c.Admit(ctx, s.ID(), req)
	if err != nil || d.Lease == nil {
		t.Fatalf("admit: %v %+v", err, d)
	}
	if got := d.Lease.ExpiresAt.Sub(asked); got < 29*time.Second || got > 31*time.Second {
		t.Errorf("granted for %s, want the 30s first term", got)
	}
	l, err := c.Renew(ctx, s.ID(), &bus.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.ExpiresAt.Sub(asked); got < 599*time.Second || got > 601*time.Second {
		t.Errorf("renewed for %s, want the 600s asked for", got)
	}
}
