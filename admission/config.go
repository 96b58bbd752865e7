package admission

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Config is the controller's configuration. Fields documented with a
// default take it when zero.
type Config struct {
	// Mode is the GPU's sharing mode: predictor.ModeMPS or ModeTimeslice.
	Mode predictor.Mode
	// Services are the inference services on this GPU (at least one).
	Services []ServiceSpec
	// Headroom in [0,1): a service's predicted p99 must stay within
	// (1 − Headroom) × its SLO.
	Headroom float64
	// MaxJobs bounds the live co-located leases (default 4); a lease that
	// holds a MIG instance whole (Lease.Instance) is not one.
	MaxJobs int
	// MemoryReserveMiB is device memory never granted (≥ 0).
	MemoryReserveMiB int
	// PctStep is the step of the percentage grid the search walks (default 5).
	PctStep int
	// LeaseDefault is the length of a lease that asks for none (default 5m);
	// LeaseMax the longest a lease may ask for (default 1h; longer requests
	// are clamped).
	LeaseDefault, LeaseMax time.Duration
	// LeaseFirstTerm is how long a new lease lives before its first renew or
	// register (default 1m; a shorter lease keeps its own length). Either
	// extends it to its full duration: a grant whose launcher gave up
	// before the answer arrived frees its capacity after this term.
	LeaseFirstTerm time.Duration
	// DecisionTimeout caps how long a decision (admit, quote) or a status
	// prediction may take, whatever the caller's own deadline (default 5s).
	// Past it the request fails with ErrTimeout and nothing is granted.
	DecisionTimeout time.Duration
	// PipeDir is the MPS pipe directory given to clients (required in MPS mode).
	PipeDir string
	// VisibleDevice is the MIG device's UUID ("MIG-…") when the GPU
	// guarded is one: clients get CUDA_VISIBLE_DEVICES set to it. "" for a
	// whole GPU.
	VisibleDevice string
	// VisibilityWindow: a lease granted less than this long ago that has no
	// registered PIDs is "not yet visible" to NVML, so its memory is
	// subtracted from NVML's free memory (default 60s). See docs/admission.md.
	VisibilityWindow time.Duration
	// RaiseAfter is how long the margin must hold before a lowered lease is
	// offered a higher percentage with a raise event (default 5m).
	RaiseAfter time.Duration
	// MinMovePct is the smallest change of a live lease's percentage that
	// a raise, or an admit's joint allocation, makes (default PctStep): a
	// move costs the launcher a restart of its workers. A throttle the SLOs
	// need is made whatever its size.
	MinMovePct int
	// MaxWeight caps what a job's declared job.weight counts for in a joint
	// allocation (default MaxWeight, 1000). Launchers declare weights and
	// colocd cannot check them: 1 makes every job count the same.
	MaxWeight float64
	// ThrottleGrace is how long a launcher has to act on a throttle or
	// revoke event (default 2m): to register workers restarted at the new
	// percentage, or to stop. Past it the lease is revoked and evicted.
	ThrottleGrace time.Duration
	// IdempotencyTTL is how long a request_id's decision is remembered
	// (default 10m); IdempotencyMax bounds how many are (default 1024).
	IdempotencyTTL time.Duration
	IdempotencyMax int
	// SearchWorkers is how many percentages the search predicts at once
	// (default 1: a binary search on one core). The Predictor must then be
	// safe for concurrent use (Model is).
	SearchWorkers int
}

// Defaults of Config's optional fields.
const (
	DefaultMaxJobs          = 4
	DefaultPctStep          = 5
	DefaultLeaseDefault     = 5 * time.Minute
	DefaultLeaseMax         = time.Hour
	DefaultLeaseFirstTerm   = time.Minute
	DefaultDecisionTimeout  = 5 * time.Second
	DefaultVisibilityWindow = time.Minute
	DefaultThrottleGrace    = 2 * time.Minute
	DefaultRaiseAfter       = 5 * time.Minute
	DefaultIdempotencyTTL   = 10 * time.Minute
	DefaultIdempotencyMax   = 1024
)

// withDefaults returns cfg with every zero optional field set.
func (cfg Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.MaxJobs, DefaultMaxJobs)
	def(&cfg.PctStep, DefaultPctStep)
	def(&cfg.MinMovePct, cfg.PctStep)
	if cfg.MaxWeight == 0 {
		cfg.MaxWeight = MaxWeight
	}
	def(&cfg.IdempotencyMax, DefaultIdempotencyMax)
	def(&cfg.SearchWorkers, 1)
	defD(&cfg.LeaseDefault, DefaultLeaseDefault)
	defD(&cfg.LeaseMax, DefaultLeaseMax)
	defD(&cfg.LeaseFirstTerm, DefaultLeaseFirstTerm)
	defD(&cfg.DecisionTimeout, DefaultDecisionTimeout)
	defD(&cfg.VisibilityWindow, DefaultVisibilityWindow)
	defD(&cfg.ThrottleGrace, DefaultThrottleGrace)
	defD(&cfg.RaiseAfter, DefaultRaiseAfter)
	defD(&cfg.IdempotencyTTL, DefaultIdempotencyTTL)
	cfg.Services = slices.Clone(cfg.Services)
	for i := range cfg.Services {
		if s := &cfg.Services[i]; s.Profile != nil && s.Key == (predictor.ProfileKey{}) {
			s.Key = s.Profile.Key()
		}
	}
	return cfg
}

// Validate names every bad field, in a *ValidationError. Zero optional
// fields take their defaults first, as in New.
func (cfg Config) Validate() error {
	cfg = cfg.withDefaults()
	var c fields
	switch cfg.Mode {
	case predictor.ModeMPS:
		if cfg.PipeDir == "" {
			c.add("pipe_dir", "the MPS pipe directory (mps mode)", `""`)
		}
	case predictor.ModeTimeslice:
	default:
		c.add("mode", `"mps" or "timeslice"`, fmt.Sprintf("%q", cfg.Mode))
	}
	checkServices(&c, cfg.Services, cfg.Headroom)
	positive := func(field string, v int) {
		if v < 1 {
			c.add(field, "a count ≥ 1", fmt.Sprint(v))
		}
	}
	positive("max_jobs", cfg.MaxJobs)
	positive("idempotency_max", cfg.IdempotencyMax)
	positive("search_workers", cfg.SearchWorkers)
	if cfg.MemoryReserveMiB < 0 {
		c.add("memory_reserve_mib", "MiB ≥ 0", fmt.Sprint(cfg.MemoryReserveMiB))
	}
	if cfg.PctStep < 1 || cfg.PctStep > 100 {
		c.add("pct_step", "a percentage step in [1, 100]", fmt.Sprint(cfg.PctStep))
	}
	if !(cfg.MaxWeight >= 1 && cfg.MaxWeight <= MaxWeight) {
		c.add("max_weight", "a weight in [1, 1000]", fmt.Sprint(cfg.MaxWeight))
	}
	if cfg.MinMovePct < 1 || cfg.MinMovePct > 100 {
		c.add("min_move_pct", "a percentage in [1, 100]", fmt.Sprint(cfg.MinMovePct))
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"lease.default", cfg.LeaseDefault}, {"lease.max", cfg.LeaseMax}, {"lease.first_term", cfg.LeaseFirstTerm},
		{"decision_timeout", cfg.DecisionTimeout},
		{"visibility_window", cfg.VisibilityWindow}, {"throttle_grace", cfg.ThrottleGrace}, {"raise_after", cfg.RaiseAfter},
		{"idempotency_ttl", cfg.IdempotencyTTL},
	} {
		if d.v < time.Second {
			c.add(d.field, "a duration ≥ 1s", d.v.String())
		}
	}
	if cfg.LeaseDefault > cfg.LeaseMax {
		c.add("lease.default", fmt.Sprintf("a duration ≤ lease.max (%s)", cfg.LeaseMax), cfg.LeaseDefault.String())
	}
	return c.err("config")
}

// checkServices checks the services and the headroom (what UpdateServices
// may change).
func checkServices(c *fields, services []ServiceSpec, headroom float64) {
	if !(headroom >= 0 && headroom < 1) {
		c.add("headroom", "a fraction in [0, 1)", fmt.Sprint(headroom))
	}
	if len(services) == 0 {
		c.add("services", "at least one inference service", "none")
	}
	seen := map[string]bool{}
	for i, s := range services {
		at := fmt.Sprintf("services[%d]", i)
		switch {
		case s.Name == "":
			c.add(at+".name", "a non-empty name", `""`)
		case seen[s.Name]:
			c.add(at+".name", "a name unique among the services", fmt.Sprintf("%q again", s.Name))
		}
		seen[s.Name] = true
		switch {
		case s.Profile == nil:
			c.add(at+".profile", "an inference profile", "none")
		case s.Profile.Kind != predictor.KindInference:
			c.add(at+".profile.kind", `"inference"`, fmt.Sprintf("%q", s.Profile.Kind))
		default:
			if err := s.Profile.Validate(); err != nil {
				c.nested(at+".profile", err)
			}
		}
		if !(s.RateRPS > 0) || math.IsInf(s.RateRPS, 0) {
			c.add(at+".rate_rps", "a request rate > 0", fmt.Sprint(s.RateRPS))
		}
		if b := s.BurstSteps; b != 0 && !(b >= 1 && b <= predictor.MaxBurstSteps) {
			c.add(at+".burst_steps", "an engine's mean burst in [1, 100000] steps (0: a request service)", fmt.Sprint(b))
		}
		if !(s.SLOP99MS > 0) || math.IsInf(s.SLOP99MS, 0) {
			c.add(at+".slo.p99_ms", "a latency > 0 ms", fmt.Sprint(s.SLOP99MS))
		}
	}
}
