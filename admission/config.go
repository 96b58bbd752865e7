package admission

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Settings are the admission section of colocd's configuration file
// (docs/configuration.md#admission): the knobs an operator sets, all of
// which a reload applies to a running controller (Reconfigure). Config
// embeds them; zero fields documented with a default take it in New.
type Settings struct {
	// Headroom in [0,1): a service's predicted p99 must stay within
	// (1 − Headroom) × its SLO.
	Headroom float64 `mapstructure:"headroom"`
	// MaxJobs bounds the live co-located leases (default 4); a lease that
	// holds a MIG instance whole (Lease.Instance) is not one.
	MaxJobs int `mapstructure:"max_jobs"`
	// MemoryReserveMiB is device memory never granted, on top of what
	// the device reports used (≥ 0).
	MemoryReserveMiB int `mapstructure:"memory_reserve_mib"`
	// PctStep is the step of the percentage grid the search walks
	// (default 5).
	PctStep int `mapstructure:"pct_step"`
	// MaxWeight caps what a job's declared job.weight counts for in a
	// joint allocation (default MaxWeight, 1000). Launchers declare
	// weights and colocd cannot check them: 1 makes every job count the
	// same.
	MaxWeight float64 `mapstructure:"max_weight"`
	// DecisionTimeout caps how long a decision (admit, quote) or a status
	// prediction may take, whatever the caller's own deadline (default
	// 5s). Past it the request fails with ErrTimeout and nothing is
	// granted.
	DecisionTimeout time.Duration `mapstructure:"decision_timeout"`
	// Identity bounds what each launcher identity may hold and claim,
	// and Identities override it for named identities (identity.go).
	Identity   IdentityLimits  `mapstructure:"identity"`
	Identities []NamedIdentity `mapstructure:"identities"`
	// Lease bounds lease durations.
	Lease LeaseTerms `mapstructure:"lease"`
	// Guard says how running leases are enforced.
	Guard GuardSettings `mapstructure:"guard"`
}

// LeaseTerms bound how long a grant lives before it must be renewed.
type LeaseTerms struct {
	// Default is the length of a lease that asks for none (default 5m).
	Default time.Duration `mapstructure:"default"`
	// Max is the longest a lease may ask for (default 1h; longer requests
	// are clamped).
	Max time.Duration `mapstructure:"max"`
	// FirstTerm is how long a new lease lives before its first renew or
	// register (default 1m; a shorter lease keeps its own length). Either
	// extends it to its full duration: a grant whose launcher gave up
	// before the answer arrived frees its capacity after this term.
	FirstTerm time.Duration `mapstructure:"first_term"`
}

// GuardSettings say how the leases re-planned at run time are enforced.
type GuardSettings struct {
	// Deadline is how long a launcher has to act on a throttle or revoke
	// event (default 2m): to register workers restarted at the new
	// percentage, or to stop. Past it the lease is revoked and evicted.
	Deadline time.Duration `mapstructure:"deadline"`
	// RaiseAfter is how long the margin must hold before a lowered lease
	// is offered a higher percentage with a raise event (default 5m).
	RaiseAfter time.Duration `mapstructure:"raise_after"`
	// ExploreAfter is how long the margin must hold before a lease whose
	// trainer's response the guard has learned (guard_response.go) is raised a
	// step (default 1m, chosen by replay, docs/guard.md): the response
	// is then measured, not predicted, and each step is judged by the
	// windows after it.
	ExploreAfter time.Duration `mapstructure:"explore_after"`
	// LearnResponse lets the guard learn, from its own windows, how each
	// service's observed p99 answers a trainer's percentage on this GPU,
	// and decide on that (guard_response.go; default true, chosen by
	// replay cross-validation, docs/guard.md: it did more work than the
	// model's prior with its correction, with fewer minutes over).
	LearnResponse bool `mapstructure:"learn_response"`
	// ResponseQuantile is the quantile of a learned percentage's last
	// windows that predictions use (default 0.8, chosen by replay
	// cross-validation, docs/guard.md; 1: the largest of them): a window
	// taken at a burst stands aside.
	ResponseQuantile float64 `mapstructure:"response_quantile"`
	// RaiseStepPct is the step of the percentages a raise may reach
	// (default 0: pct_step): a finer one lets a lease rise to just under
	// the limit instead of a whole pct_step below it.
	RaiseStepPct int `mapstructure:"raise_step_pct"`
	// RaiseFailLoad is how much the load the guard plans on may rise
	// between a raise and a throttle within raise_after of it for the
	// throttle not to count as a failed raise (default 0: every such
	// throttle counts): the load, not the percentage, broke the margin.
	RaiseFailLoad float64 `mapstructure:"raise_fail_load"`
	// ResponseTTL is how long a learned percentage's ratio stands against
	// a newer measurement a step below it (default 10m, chosen by
	// replay): past it the guard explores that percentage again from the
	// newer one, since the load it was measured at has gone.
	ResponseTTL time.Duration `mapstructure:"response_ttl"`
	// MinMovePct is the smallest change of a live lease's percentage that
	// a raise, or an admit's joint allocation, makes (default PctStep): a
	// move costs the launcher a restart of its workers. A throttle the
	// SLOs need is made whatever its size.
	MinMovePct int `mapstructure:"min_move_pct"`
	// RevokeAfter is how long the guard must find no room for a lease even
	// at its min_pct before it revokes it (default 1m): until then the
	// lease is throttled to its min_pct, so that a burst throttles and
	// only a lasting rise revokes.
	RevokeAfter time.Duration `mapstructure:"revoke_after"`
	// MaxRevokesPerHour bounds the guard's revokes in any hour (default
	// 2): past it a lease with no room stays at its min_pct unless a
	// service's observed p99 is over its SLO. Revokes for a fault are not
	// counted.
	MaxRevokesPerHour int `mapstructure:"max_revokes_per_hour"`
	// GrantBeforeMeasured lets a new job be granted up to its max_pct
	// before the guard has measured the servers' latency next to a
	// training job (default false: its min_pct until then, raised once the
	// measurement shows room; guard_observed.go).
	GrantBeforeMeasured bool `mapstructure:"grant_before_measured"`
	// PlanBelowConfigured lets decisions and the guard plan on a service's
	// observed (or forecast) load when it is below the configured rate,
	// rounded up to its band (default false: never below the configured
	// rate): a lull is harvested, and the guard throttles the lease when
	// the load comes back (guard_observed.go).
	PlanBelowConfigured bool `mapstructure:"plan_below_configured"`
	// MaxHold is the longest the guard holds back after a revoke or a
	// failed raise (default 1h): the hold is RaiseAfter, doubled for each
	// further one in the last hour, up to MaxHold (or RaiseAfter, when
	// that is longer).
	MaxHold time.Duration `mapstructure:"max_hold"`
}

// DefaultSettings are the file's defaults: every default above, a tenth
// of each SLO kept free and 2 GiB of memory never granted.
func DefaultSettings() Settings {
	return Settings{
		Headroom:         0.1,
		MaxJobs:          DefaultMaxJobs,
		MemoryReserveMiB: 2048,
		PctStep:          DefaultPctStep,
		MaxWeight:        MaxWeight,
		DecisionTimeout:  DefaultDecisionTimeout,
		Identity:         DefaultIdentity(),
		Identities:       []NamedIdentity{},
		Lease:            LeaseTerms{Default: DefaultLeaseDefault, Max: DefaultLeaseMax, FirstTerm: DefaultLeaseFirstTerm},
		Guard: GuardSettings{Deadline: DefaultThrottleGrace, RaiseAfter: DefaultRaiseAfter, ExploreAfter: DefaultExploreAfter, ResponseTTL: DefaultResponseTTL, RevokeAfter: DefaultRevokeAfter,
			MaxRevokesPerHour: DefaultMaxRevokesPerHour, ResponseQuantile: DefaultResponseQuantile, MaxHold: DefaultMaxHold, LearnResponse: true},
	}
}

// Validate names every bad key of the section ("admission.max_jobs"), in a
// *field.List. Zero fields are not filled in first: in the file each
// key has its value.
func (s Settings) Validate() error {
	var c fields
	s.check(&c)
	return c.err("admission settings")
}

// check adds the settings' problems to c.
func (s Settings) check(c *fields) {
	if !(s.Headroom >= 0 && s.Headroom < 1) {
		c.add("admission.headroom", "a fraction in [0, 1)", fmt.Sprint(s.Headroom))
	}
	if s.MaxJobs < 1 {
		c.add("admission.max_jobs", "a count ≥ 1", fmt.Sprint(s.MaxJobs))
	}
	if s.MemoryReserveMiB < 0 || s.MemoryReserveMiB > math.MaxInt32 {
		c.add("admission.memory_reserve_mib", "a size in MiB ≥ 0", fmt.Sprint(s.MemoryReserveMiB))
	}
	if s.PctStep < 1 || s.PctStep > 100 {
		c.add("admission.pct_step", "a percentage step from 1 to 100", fmt.Sprint(s.PctStep))
	}
	if !(s.MaxWeight >= 1 && s.MaxWeight <= MaxWeight) {
		c.add("admission.max_weight", "a weight from 1 to 1000", fmt.Sprint(s.MaxWeight))
	}
	if s.Guard.MaxRevokesPerHour < 1 || s.Guard.MaxRevokesPerHour > 3600 {
		c.add("admission.guard.max_revokes_per_hour", "a count from 1 to 3600", fmt.Sprint(s.Guard.MaxRevokesPerHour))
	}
	if !(s.Guard.ResponseQuantile >= 0 && s.Guard.ResponseQuantile <= 1) {
		c.add("admission.guard.response_quantile", "a quantile in (0, 1], or 0 for the default", fmt.Sprint(s.Guard.ResponseQuantile))
	}
	if s.Guard.RaiseStepPct < 0 || s.Guard.RaiseStepPct > 100 {
		c.add("admission.guard.raise_step_pct", "a percentage step from 0 (pct_step) to 100", fmt.Sprint(s.Guard.RaiseStepPct))
	}
	if !(s.Guard.RaiseFailLoad >= 0 && s.Guard.RaiseFailLoad <= 10) {
		c.add("admission.guard.raise_fail_load", "a fraction from 0 (every throttle counts) to 10", fmt.Sprint(s.Guard.RaiseFailLoad))
	}
	if s.Guard.MinMovePct < 0 || s.Guard.MinMovePct > 100 {
		c.add("admission.guard.min_move_pct", "a percentage from 0 (one pct_step) to 100", fmt.Sprint(s.Guard.MinMovePct))
	}
	for _, d := range []struct {
		key     string
		v       time.Duration
		min     time.Duration
		max     time.Duration
		maxText string
	}{
		{"admission.decision_timeout", s.DecisionTimeout, time.Second, 10 * time.Minute, "10m"},
		{"admission.lease.default", s.Lease.Default, time.Second, math.MaxInt64, ""},
		{"admission.lease.max", s.Lease.Max, time.Second, math.MaxInt64, ""},
		{"admission.lease.first_term", s.Lease.FirstTerm, time.Second, math.MaxInt64, ""},
		{"admission.guard.deadline", s.Guard.Deadline, time.Second, time.Hour, "1h"},
		{"admission.guard.raise_after", s.Guard.RaiseAfter, time.Second, 24 * time.Hour, "24h"},
		{"admission.guard.explore_after", s.Guard.ExploreAfter, time.Second, 24 * time.Hour, "24h"},
		{"admission.guard.response_ttl", s.Guard.ResponseTTL, time.Second, 24 * time.Hour, "24h"},
		{"admission.guard.revoke_after", s.Guard.RevokeAfter, time.Second, time.Hour, "1h"},
		{"admission.guard.max_hold", s.Guard.MaxHold, time.Second, 24 * time.Hour, "24h"},
	} {
		switch {
		case d.v >= d.min && d.v <= d.max:
		case d.maxText != "":
			c.add(d.key, "a duration from 1s to "+d.maxText, d.v.String())
		default:
			c.add(d.key, "a duration of at least 1s", d.v.String())
		}
	}
	s.checkIdentities(c)
	if s.Lease.Default > s.Lease.Max && s.Lease.Max >= time.Second {
		c.add("admission.lease.default", fmt.Sprintf("a duration at most admission.lease.max (%v)", s.Lease.Max), s.Lease.Default.String())
	}
}

// Config is the controller's configuration: the file's admission section
// (Settings, which a reload applies) and what the sidecar knows of the GPU
// and its services. Fields documented with a default take it when zero.
type Config struct {
	Settings
	// Mode is the GPU's sharing mode: predictor.ModeMPS or ModeTimeslice.
	Mode predictor.Mode
	// Services are the inference services on this GPU (at least one).
	Services []ServiceSpec
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
	DefaultMaxJobs           = 4
	DefaultPctStep           = 5
	DefaultLeaseDefault      = 5 * time.Minute
	DefaultLeaseMax          = time.Hour
	DefaultLeaseFirstTerm    = time.Minute
	DefaultDecisionTimeout   = 5 * time.Second
	DefaultVisibilityWindow  = time.Minute
	DefaultThrottleGrace     = 2 * time.Minute
	DefaultRaiseAfter        = time.Minute
	DefaultExploreAfter      = time.Minute
	DefaultResponseTTL       = 10 * time.Minute
	DefaultResponseQuantile  = 0.8
	DefaultRevokeAfter       = time.Minute
	DefaultMaxHold           = time.Hour
	DefaultMaxRevokesPerHour = 2
	DefaultIdempotencyTTL    = 10 * time.Minute
	DefaultIdempotencyMax    = 1024
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
	def(&cfg.Guard.MinMovePct, cfg.PctStep)
	if cfg.MaxWeight == 0 {
		cfg.MaxWeight = MaxWeight
	}
	if cfg.Identity.MaxWeight == 0 {
		cfg.Identity.MaxWeight = DefaultIdentity().MaxWeight
	}
	def(&cfg.IdempotencyMax, DefaultIdempotencyMax)
	def(&cfg.SearchWorkers, 1)
	defD(&cfg.Lease.Default, DefaultLeaseDefault)
	defD(&cfg.Lease.Max, DefaultLeaseMax)
	defD(&cfg.Lease.FirstTerm, DefaultLeaseFirstTerm)
	defD(&cfg.DecisionTimeout, DefaultDecisionTimeout)
	defD(&cfg.VisibilityWindow, DefaultVisibilityWindow)
	defD(&cfg.Guard.Deadline, DefaultThrottleGrace)
	defD(&cfg.Guard.RevokeAfter, DefaultRevokeAfter)
	defD(&cfg.Guard.MaxHold, DefaultMaxHold)
	def(&cfg.Guard.MaxRevokesPerHour, DefaultMaxRevokesPerHour)
	defD(&cfg.Guard.RaiseAfter, DefaultRaiseAfter)
	defD(&cfg.Guard.ExploreAfter, DefaultExploreAfter)
	defD(&cfg.Guard.ResponseTTL, DefaultResponseTTL)
	if cfg.Guard.ResponseQuantile == 0 {
		cfg.Guard.ResponseQuantile = DefaultResponseQuantile
	}
	defD(&cfg.IdempotencyTTL, DefaultIdempotencyTTL)
	cfg.Services = slices.Clone(cfg.Services)
	for i := range cfg.Services {
		if s := &cfg.Services[i]; s.Profile != nil && s.Key == (predictor.ProfileKey{}) {
			s.Key = s.Profile.Key()
		}
	}
	return cfg
}

// Validate names every bad field, in a *field.List. Zero optional
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
	cfg.Settings.check(&c)
	checkServices(&c, cfg.Services)
	positive := func(field string, v int) {
		if v < 1 {
			c.add(field, "a count ≥ 1", fmt.Sprint(v))
		}
	}
	positive("idempotency_max", cfg.IdempotencyMax)
	positive("search_workers", cfg.SearchWorkers)
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"visibility_window", cfg.VisibilityWindow}, {"idempotency_ttl", cfg.IdempotencyTTL}} {
		if d.v < time.Second {
			c.add(d.field, "a duration ≥ 1s", d.v.String())
		}
	}
	return c.err("config")
}

// checkServices checks the services (what UpdateServices may change).
func checkServices(c *fields, services []ServiceSpec) {
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
