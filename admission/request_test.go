package admission

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/internal/fieldtest"
	"github.com/colocd/colocd/predictor"
)

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(r *Request)
		fields []string // the wire names the error names, in order; none: valid
	}{
		{"valid", func(*Request) {}, nil},
		{"no request id", func(r *Request) { r.RequestID = "" }, []string{"request_id"}},
		{"request id with a newline", func(r *Request) { r.RequestID = "a\nb" }, []string{"request_id"}},
		{"request id too long", func(r *Request) { r.RequestID = strings.Repeat("x", 129) }, []string{"request_id"}},
		{"request id too short to be unguessable", func(r *Request) { r.RequestID = strings.Repeat("x", 21) }, []string{"request_id"}},
		{"request id with a space", func(r *Request) { r.RequestID = strings.Repeat("x", 22) + " " }, []string{"request_id"}},
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
		{"memory at the ceiling", func(r *Request) { r.MemoryMiB = predictor.MaxMemoryMiB }, nil},
		{"profile memory at the ceiling", func(r *Request) { r.MemoryMiB, r.Profile.MemoryMiB = 0, predictor.MaxMemoryMiB }, nil},
		{"lease of a year", func(r *Request) { r.LeaseSeconds = MaxLeaseSeconds }, nil},
		{"priority at its lower bound", func(r *Request) { r.Priority = MinPriority }, nil},
		{"priority at its upper bound", func(r *Request) { r.Priority = MaxPriority }, nil},
		{"every field at once", func(r *Request) { *r = Request{MinPct: -1, MaxPct: 0, LeaseSeconds: -1} },
			[]string{"request_id", "job.id", "profile", "compute.min_pct", "compute.max_pct", "lease_seconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request("r1")
			tt.edit(&r)
			err := r.Validate()
			fieldtest.WantPaths(t, err, tt.fields...)
			if tt.fields == nil {
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
			var fe *field.Error
			if !errors.As(err, &fe) {
				t.Error("errors.As finds no FieldError")
			}
		})
	}
}

func TestLeaseDuration(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.Lease.Default, c.Lease.Max = 300e9, 3600e9 })
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

// Every number of a request is bounded: a value past a bound is a 400 that
// names the field by its wire name and says what was expected, and nothing
// overflows on the way to the grant's env (the probe that found this sent
// profile memory_mib 1e300 and got CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=-9223372036854775808M).
func TestRequestValidateBounds(t *testing.T) {
	t.Parallel()
	tinyOps := func(r *Request) {
		// 1,000 ops in a 1 µs unit: 1e9 events per simulated second.
		ops := make([]predictor.Op, 1000)
		for i := range ops {
			ops[i] = predictor.Op{SM: 1, Occupancy: 1}
		}
		ops[0].DurUS = 1
		r.Profile.Ops = ops
	}
	tests := []struct {
		name  string
		edit  func(r *Request)
		field string // the one field named
		want  string // in what the error says was expected
		got   string
	}{
		{"memory past 16 TiB", func(r *Request) { r.MemoryMiB = predictor.MaxMemoryMiB + 1 }, "memory_mib", "MiB in [0, 16777216]", "16777217"},
		{"memory of max int", func(r *Request) { r.MemoryMiB = math.MaxInt }, "memory_mib", "MiB in [0, 16777216]", "9223372036854775807"},
		{"profile memory 1e300 (the probe)", func(r *Request) { r.MemoryMiB, r.Profile.MemoryMiB = 0, 1e300 }, "profile.memory_mib", "MiB in [0, 16777216]", "1e+300"},
		{"profile memory 1e19", func(r *Request) { r.MemoryMiB, r.Profile.MemoryMiB = 0, 1e19 }, "profile.memory_mib", "MiB in [0, 16777216]", "1e+19"},
		{"profile memory just past 16 TiB", func(r *Request) { r.MemoryMiB, r.Profile.MemoryMiB = 0, predictor.MaxMemoryMiB+0.5 }, "profile.memory_mib", "MiB in [0, 16777216]", "1.67772165e+07"},
		{"profile memory NaN", func(r *Request) { r.Profile.MemoryMiB = math.NaN() }, "profile.memory_mib", "MiB in [0, 16777216]", "NaN"},
		{"profile memory +Inf", func(r *Request) { r.Profile.MemoryMiB = math.Inf(1) }, "profile.memory_mib", "MiB in [0, 16777216]", "+Inf"},
		{"profile memory negative", func(r *Request) { r.Profile.MemoryMiB = -1 }, "profile.memory_mib", "MiB in [0, 16777216]", "-1"},
		{"lease past a year", func(r *Request) { r.LeaseSeconds = MaxLeaseSeconds + 1 }, "lease_seconds", "seconds in [0, 31536000]", "31536001"},
		{"lease of max int", func(r *Request) { r.LeaseSeconds = math.MaxInt }, "lease_seconds", "seconds in [0, 31536000]", "9223372036854775807"},
		{"priority too high", func(r *Request) { r.Priority = MaxPriority + 1 }, "job.priority", "an integer in [-1000000, 1000000]", "1000001"},
		{"priority of min int", func(r *Request) { r.Priority = math.MinInt }, "job.priority", "an integer in [-1000000, 1000000]", "-9223372036854775808"},
		{"weight negative", func(r *Request) { r.Weight = -1 }, "job.weight", "a weight in (0, 1000] (absent: 1)", "-1"},
		{"weight too high", func(r *Request) { r.Weight = 1001 }, "job.weight", "a weight in (0, 1000] (absent: 1)", "1001"},
		{"weight NaN", func(r *Request) { r.Weight = math.NaN() }, "job.weight", "a weight in (0, 1000] (absent: 1)", "NaN"},
		{"weight infinite", func(r *Request) { r.Weight = math.Inf(1) }, "job.weight", "a weight in (0, 1000] (absent: 1)", "+Inf"},
		{"profile with ops too short to simulate", tinyOps, "profile.ops", "0.01 µs per op (1000 ops: 10 µs)", "1"},
		{"profile op duration past an hour", func(r *Request) { r.Profile.Ops[0].DurUS = 1e300 }, "profile.ops[0].dur_us", "≤ 3.6e9 µs (one hour)", "1e+300"},
		{"profile device with a million SMs", func(r *Request) { r.Profile.Device.SMs = 1_000_000 }, "profile.device.sms", "an SM count in [0, 10000]", "1000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request("r1")
			tt.edit(&r)
			err := r.Validate()
			var ve *field.List
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want a *field.List matching ErrInvalid", err)
			}
			if len(ve.Errors) != 1 {
				t.Fatalf("got %d field errors (%v), want one for %s", len(ve.Errors), err, tt.field)
			}
			f := ve.Errors[0]
			if f.Path != tt.field || !strings.Contains(f.Want, tt.want) || f.Got != tt.got {
				t.Errorf("got %s: want %q, got %q; want %s: want …%q…, got %q", f.Path, f.Want, f.Got, tt.field, tt.want, tt.got)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.field+": want ") {
				t.Errorf("message %q does not name %s", msg, tt.field)
			}
		})
	}
}

// idShape matches exactly what ^[A-Za-z0-9_-]{min,max}$ matches.
func FuzzIDShape(f *testing.F) {
	for _, s := range []string{"", "a", "job-1_X", "bad id", "é", "a\x00", strings.Repeat("a", 64), strings.Repeat("a", 65)} {
		f.Add(s)
	}
	re := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := safeToken.MatchString(s), re.MatchString(s); got != want {
			t.Errorf("%q: %v, the regexp says %v", s, got, want)
		}
	})
}
