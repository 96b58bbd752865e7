package admission

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/predictor"
)

// FuzzRequestEnv drives the numbers of an admit request (its memory, the
// profile's memory_mib as raw float64 bits, the percentages, the lease
// length, the priority) from validation to the grant's env: a request that
// validates pins between 1 MiB and predictor.MaxMemoryMiB, its
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is "0=<MiB>M" with no sign, and its lease
// length neither overflows nor passes lease.max. One that does not validate
// is ErrInvalid naming only fuzzed fields by their wire names.
func FuzzRequestEnv(f *testing.F) {
	one := math.Float64bits(1)
	f.Add(4096, math.Float64bits(2048), 10, 100, 600, 0)
	f.Add(0, math.Float64bits(1e300), 10, 100, 600, 0) // the probe
	f.Add(0, math.Float64bits(1e19), 1, 1, 0, 1)
	f.Add(0, math.Float64bits(predictor.MaxMemoryMiB), 1, 100, MaxLeaseSeconds, MaxPriority)
	f.Add(0, math.Float64bits(predictor.MaxMemoryMiB)+1, 1, 100, MaxLeaseSeconds+1, MinPriority-1)
	f.Add(0, math.Float64bits(5e-324), 50, 50, 1, -1) // the smallest float rounds up to 1 MiB
	f.Add(0, math.Float64bits(math.NaN()), 10, 100, 600, 0)
	f.Add(0, math.Float64bits(math.Inf(1)), 10, 100, 600, 0)
	f.Add(0, math.Float64bits(math.Copysign(0, -1)), 10, 100, 600, 0)
	f.Add(math.MaxInt, one, 10, 100, math.MaxInt, math.MaxInt)
	f.Add(math.MinInt, one, math.MinInt, math.MaxInt, math.MinInt, math.MinInt)
	// lease.max above a year, so that lease_seconds is bounded by
	// validation alone, not by the clamp.
	h := newHarness(f, predictor.ModeMPS, 100, func(c *Config) { c.Lease.Max = 2 * 365 * 24 * time.Hour })
	fuzzed := map[string]bool{"memory_mib": true, "profile.memory_mib": true, "compute.min_pct": true,
		"compute.max_pct": true, "lease_seconds": true, "job.priority": true}
	f.Fuzz(func(t *testing.T, memory int, profileMemory uint64, minPct, maxPct, leaseSeconds, priority int) {
		r := request("fuzz")
		r.MemoryMiB, r.Profile.MemoryMiB = memory, math.Float64frombits(profileMemory)
		r.MinPct, r.MaxPct, r.LeaseSeconds, r.Priority = minPct, maxPct, leaseSeconds, priority
		if err := r.Validate(); err != nil {
			var ve *field.List
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want a *field.List matching ErrInvalid", err)
			}
			for _, fe := range ve.Errors {
				if !fuzzed[fe.Path] || fe.Want == "" {
					t.Fatalf("field error %q: names no fuzzed field, or says nothing expected", fe)
				}
			}
			return
		}
		mem := r.memoryMiB()
		if mem < 1 || mem > predictor.MaxMemoryMiB {
			t.Fatalf("memory %d MiB (memory_mib %d, profile %g): want [1, %d]", mem, memory, r.Profile.MemoryMiB, predictor.MaxMemoryMiB)
		}
		env := h.c.Env(Lease{Pct: r.MaxPct, MemoryMiB: mem})
		if got, want := env[EnvPinnedMemory], fmt.Sprintf("0=%dM", mem); got != want || strings.Contains(got, "-") {
			t.Fatalf("%s=%q, want %q and no sign", EnvPinnedMemory, got, want)
		}
		if d := h.c.leaseDuration(r.LeaseSeconds); d <= 0 || d > h.c.cfg.Lease.Max {
			t.Fatalf("lease_seconds %d: a lease of %v, want (0, %v]", r.LeaseSeconds, d, h.c.cfg.Lease.Max)
		}
		if d := time.Duration(r.LeaseSeconds) * time.Second; d/time.Second != time.Duration(r.LeaseSeconds) {
			t.Fatalf("lease_seconds %d overflows a time.Duration", r.LeaseSeconds)
		}
	})
}
