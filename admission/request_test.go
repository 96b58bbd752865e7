package admission

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
)

func TestRequestValidate(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(r *Request)
		fields []string // the wire names the error names, in order; none: valid
	}{
		{"valid", func(*Request) {}, nil},
		{"no request id", func(r *Request) { r.RequestID = "" }, []string{"request_id"}},
		{"request id with a newline", func(r *Request) { r.RequestID = "a\nb" }, []string{"request_id"}},
		{"request id too long", func(r *Request) { r.RequestID = strings.Repeat("x", 129) }, []string{"request_id"}},
		{"no job id", func(r *Request) { r.JobID = "" }, []string{"job.id"}},
		{"job id with a dot (a NATS token separator)", func(r *Request) { r.JobID = "a.b" }, []string{"job.id"}},
		{"job id with a wildcard", func(r *Request) { r.JobID = "a*" }, []string{"job.id"}},
		{"job id of 65", func(r *Request) { r.JobID = strings.Repeat("j", 65) }, []string{"job.id"}},
		{"job id of 64", func(r *Request) { r.JobID = strings.Repeat("j", 64) }, nil},
		{"owner too long", func(r *Request) { r.Owner = strings.Repeat("o", 129) }, []string{"job.owner"}},
		{"no profile", func(r *Request) { r.Profile = nil }, []string{"profile"}},
		{"inference profile", func(r *Request) { r.Profile = inferenceProfile("x") }, []string{"profile.kind"}},
		{"bad op in the profile", func(r *Request) { r.Profile.Ops[2].DurUS = -1 }, []string{"profile.ops[2].dur_us"}},
		{"negative memory", func(r *Request) { r.MemoryMiB = -1 }, []string{"memory_mib"}},
		{"no memory anywhere", func(r *Request) { r.MemoryMiB, r.Profile.MemoryMiB = 0, 0 }, []string{"memory_mib"}},
		{"negative processes", func(r *Request) { r.Processes = -1 }, []string{"processes"}},
		{"more processes than MPS clients", func(r *Request) { r.Processes = 49 }, []string{"processes"}},
		{"min pct 0", func(r *Request) { r.MinPct = 0 }, []string{"compute.min_pct"}},
		{"max pct 101", func(r *Request) { r.MaxPct = 101 }, []string{"compute.max_pct"}},
		{"min above max", func(r *Request) { r.MinPct, r.MaxPct = 60, 50 }, []string{"compute.max_pct"}},
		{"negative lease", func(r *Request) { r.LeaseSeconds = -5 }, []string{"lease_seconds"}},
		{"every field at once", func(r *Request) { *r = Request{MinPct: -1, MaxPct: 0, LeaseSeconds: -1} },
			[]string{"request_id", "job.id", "profile", "compute.min_pct", "compute.max_pct", "lease_seconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request("r1")
			tt.edit(&r)
			err := r.Validate()
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %T", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("fields %v, want %v (%v)", got, tt.fields, err)
			}
			var fe *predictor.FieldError
			if !errors.As(err, &fe) {
				t.Error("errors.As finds no FieldError")
			}
		})
	}
}

func TestLeaseDuration(t *testing.T) {
	h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.LeaseDefault, c.LeaseMax = 300e9, 3600e9 })
	tests := []struct {
		secs int
		want float64 // seconds
	}{{0, 300}, {60, 60}, {3600, 3600}, {7200, 3600}, {1 << 62, 3600}}
	for _, tt := range tests {
		if got := h.c.leaseDuration(tt.secs).Seconds(); got != tt.want {
			t.Errorf("lease_seconds %d: got %gs, want %gs", tt.secs, got, tt.want)
		}
	}
}
