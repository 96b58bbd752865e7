package admission

import (
	"fmt"
	"math"
	"slices"
	"time"
	"unicode"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/predictor"
)

// Request is one training job's request for a share of the GPU: the domain
// form of the wire AdmitRequest (the sidecar maps one to the other).
type Request struct {
	// RequestID makes retries idempotent: the same id returns the same
	// decision (and the same lease) instead of a second one. The launcher
	// draws it (at least 128 bits: 22 to 128 letters, digits, '-' or '_');
	// colocd keeps only its hash.
	RequestID string
	// TokenHash is the SHA-256 of the lease token the launcher drew and
	// keeps; renew, release and register prove ownership with the token.
	// Decide requires it; Quote ignores it.
	TokenHash [32]byte
	// JobID is a safe token (letters, digits, '-', '_', at most 64): it
	// becomes a NATS subject token and part of a KV key.
	JobID string
	Owner string
	// Tenant is the launcher identity that sent the request, as the
	// sidecar resolved it from what the server authenticated (its
	// launcher name, else the user); never read from the request's body.
	// "" is a request without one (the sidecar's own account), which no
	// identity's limits hold (identity.go).
	Tenant string
	// Priority orders leases for a re-plan (lowest first lowered).
	Priority int
	// Weight values the job's throughput against other jobs' (0: 1), in
	// (0, MaxWeight]; recorded on the lease.
	Weight float64
	// Profile is the job's training profile (one iteration).
	Profile *predictor.Profile
	// ProfileKey, when set, vouches that Profile passed Validate and that
	// this is Profile.Key(): the sidecar's profile cache parses, validates
	// and keys each distinct profile once, at the edge. Zero: Decide
	// validates and keys the profile itself, on every request.
	ProfileKey predictor.ProfileKey
	// MemoryMiB is the device memory the job pins (its MPS limit); 0 takes
	// the profile's memory_mib. One of the two must be > 0.
	MemoryMiB int
	// Processes is how many GPU processes the job starts (0: unknown); it
	// bounds the PIDs Register accepts.
	Processes int
	// MinPct and MaxPct bound the MPS active-thread percentage:
	// 1 ≤ MinPct ≤ MaxPct ≤ 100 (checked, but not used, under time slicing).
	MinPct, MaxPct int
	// LeaseSeconds is the lease's length; 0 takes Config.LeaseDefault, and a
	// value above Config.LeaseMax is clamped to it (the grant says so by its
	// ExpiresAt).
	LeaseSeconds int
	// Checkpointable says the job can restart from a checkpoint, so a
	// throttle (a restart at a lower percentage) costs it little.
	Checkpointable bool
}

// Limits on request fields.
const (
	maxJobIDLen = 64
	maxOwnerLen = 128
	// MaxProcesses is the MPS limit on client contexts per device (Volta and
	// newer): a job cannot run more GPU processes than this.
	MaxProcesses = 48
	// MaxLeaseSeconds bounds lease_seconds (one year): a request is clamped
	// to Config.LeaseMax anyway, and this keeps seconds × time.Second far
	// from overflowing a time.Duration (about 292 years).
	MaxLeaseSeconds = 365 * 24 * 60 * 60
	// MinPriority and MaxPriority bound job.priority, recorded on the lease.
	MinPriority, MaxPriority = -1_000_000, 1_000_000
	// MaxWeight bounds job.weight.
	MaxWeight = 1000
)

// The shapes of ids, as [min, max] lengths of base64url characters
// (A–Z a–z 0–9 _ -): a job id is a NATS subject token; a request_id has at
// least 22 (128 bits) or 32 hex digits, so that nobody can guess another
// launcher's.
var (
	safeToken   = idShape{1, 64}
	requestIDRe = idShape{22, 128}
)

// idShape matches strings of min to max base64url characters. It is what
// ^[A-Za-z0-9_-]{min,max}$ matches, without a regexp on every decision's
// path.
type idShape struct{ min, max int }

// MatchString reports whether s has the shape.
func (sh idShape) MatchString(s string) bool {
	if len(s) < sh.min || len(s) > sh.max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Validate names every bad field by its wire name (request_id, job.id,
// compute.min_pct, profile.ops[3].dur_us, …) in a *field.List that
// matches ErrInvalid.
func (r *Request) Validate() error { return r.validate(false) }

// validate is Validate; profileValid skips the profile's own checks (its ops
// or summary), which a profile with the same key has passed before.
func (r *Request) validate(profileValid bool) error {
	var c fields
	if !requestIDRe.MatchString(r.RequestID) {
		c.add("request_id", "22 to 128 letters, digits, '-' or '_' drawn at random (at least 128 bits)", fmt.Sprintf("%q", truncate(r.RequestID)))
	}
	if !safeToken.MatchString(r.JobID) {
		c.add("job.id", "1 to 64 letters, digits, '-' or '_'", fmt.Sprintf("%q", truncate(r.JobID)))
	}
	checkText(&c, "job.owner", r.Owner, maxOwnerLen, false)
	if r.Priority < MinPriority || r.Priority > MaxPriority {
		c.add("job.priority", fmt.Sprintf("an integer in [%d, %d]", MinPriority, MaxPriority), fmt.Sprint(r.Priority))
	}
	if r.Weight != 0 && !(r.Weight > 0 && r.Weight <= MaxWeight) {
		c.add("job.weight", "a weight in (0, 1000] (absent: 1)", fmt.Sprint(r.Weight))
	}
	switch {
	case r.Profile == nil:
		c.add("profile", "a training profile", "none")
	case r.Profile.Kind != predictor.KindTraining:
		c.add("profile.kind", `"training"`, fmt.Sprintf("%q", r.Profile.Kind))
	case !profileValid:
		if err := r.Profile.Validate(); err != nil {
			c.nested("profile", err)
		}
	}
	// predictor.MaxMemoryMiB bounds the profile's memory_mib too, so the
	// pinned-memory limit in a grant's env never overflows.
	if r.MemoryMiB < 0 || r.MemoryMiB > predictor.MaxMemoryMiB {
		c.add("memory_mib", fmt.Sprintf("MiB in [0, %d] (16 TiB; 0: the profile's memory_mib)", predictor.MaxMemoryMiB), fmt.Sprint(r.MemoryMiB))
	} else if r.MemoryMiB == 0 && r.Profile != nil && !(r.Profile.MemoryMiB > 0) {
		c.add("memory_mib", "MiB > 0, or a profile with memory_mib", "0 and none in the profile")
	}
	if r.Processes < 0 || r.Processes > MaxProcesses {
		c.add("processes", fmt.Sprintf("a count in [0, %d] (0: unknown)", MaxProcesses), fmt.Sprint(r.Processes))
	}
	if r.MinPct < 1 || r.MinPct > 100 {
		c.add("compute.min_pct", "a percentage in [1, 100]", fmt.Sprint(r.MinPct))
	}
	if r.MaxPct < 1 || r.MaxPct > 100 {
		c.add("compute.max_pct", "a percentage in [1, 100]", fmt.Sprint(r.MaxPct))
	} else if r.MinPct >= 1 && r.MinPct <= 100 && r.MaxPct < r.MinPct {
		c.add("compute.max_pct", fmt.Sprintf("a percentage ≥ compute.min_pct (%d)", r.MinPct), fmt.Sprint(r.MaxPct))
	}
	if r.LeaseSeconds < 0 || r.LeaseSeconds > MaxLeaseSeconds {
		c.add("lease_seconds", fmt.Sprintf("seconds in [0, %d] (one year; 0: the default)", MaxLeaseSeconds), fmt.Sprint(r.LeaseSeconds))
	}
	return c.err("request")
}

// profileKey is ProfileKey, or Profile.Key() when the caller left it zero.
func (r *Request) profileKey() predictor.ProfileKey {
	if r.ProfileKey != (predictor.ProfileKey{}) {
		return r.ProfileKey
	}
	return r.Profile.Key()
}

// memoryMiB is the memory the job pins: its own figure, else the profile's
// rounded up. Valid requests only: validation bounds both figures by
// predictor.MaxMemoryMiB, so the result is in [1, predictor.MaxMemoryMiB].
func (r *Request) memoryMiB() int {
	if r.MemoryMiB > 0 {
		return r.MemoryMiB
	}
	return int(math.Ceil(r.Profile.MemoryMiB))
}

// checkText checks a free-text identifier: printable, at most max bytes.
func checkText(c *fields, field, s string, max int, required bool) {
	switch {
	case s == "" && required:
		c.add(field, "a non-empty string", `""`)
	case len(s) > max:
		c.add(field, fmt.Sprintf("at most %d bytes", max), fmt.Sprintf("%d bytes", len(s)))
	case slices.ContainsFunc([]rune(s), func(r rune) bool { return !unicode.IsPrint(r) }):
		c.add(field, "printable characters", fmt.Sprintf("%q", truncate(s)))
	}
}

func truncate(s string) string {
	if len(s) > 70 {
		return s[:70] + "…"
	}
	return s
}

// Outcome is the answer to a request.
type Outcome string

// The outcomes of a decision.
const (
	// Grant: admitted at the job's max_pct.
	Grant Outcome = v1.DecisionGrant
	// Throttle: admitted at a lower percentage, at least min_pct.
	Throttle Outcome = v1.DecisionThrottle
	// Deny: not admitted.
	Deny Outcome = v1.DecisionDeny
)

// ReasonCode is the stable, machine-readable reason of a decision.
type ReasonCode string

// Reason codes, the wire contract's (api/v1, where each is described):
// never rename one.
const (
	CodeFits               ReasonCode = v1.ReasonFits
	CodeFreeInstance       ReasonCode = v1.ReasonFreeInstance
	CodeThrottledToFit     ReasonCode = v1.ReasonThrottledToFit
	CodeMeasureFirst       ReasonCode = v1.ReasonMeasureFirst
	CodeSharedToFit        ReasonCode = v1.ReasonSharedToFit
	CodeSLOViolation       ReasonCode = v1.ReasonSLOViolation
	CodeTimesliceNoFit     ReasonCode = v1.ReasonTimesliceNoFit
	CodeInsufficientMemory ReasonCode = v1.ReasonInsufficientMemory
	CodeMaxJobs            ReasonCode = v1.ReasonMaxJobs
	CodeRecentRevoke       ReasonCode = v1.ReasonRecentRevoke
	CodeIdentityQuota      ReasonCode = v1.ReasonIdentityQuota
	CodeDraining           ReasonCode = v1.ReasonDraining
	CodeGPUUnhealthy       ReasonCode = v1.ReasonGPUUnhealthy
	CodeDaemonUnhealthy    ReasonCode = v1.ReasonDaemonUnhealthy
	CodePredictorUnhealthy ReasonCode = v1.ReasonPredictorUnhealthy
	CodeStoreUnavailable   ReasonCode = v1.ReasonStoreUnavailable
	CodeBusy               ReasonCode = v1.ReasonBusy
)

// ServicePrediction is one inference service's predicted tail latency with
// the decision's lease set, next to its SLO and its solo figure.
type ServicePrediction struct {
	Service string
	// RateRPS is the request rate predicted at: the configured one, or the
	// observed one (rounded up to its band) when that is higher.
	RateRPS        float64
	SLOP99MS       float64
	SoloP99MS      float64
	PredictedP99MS float64
	// Step says the figures are an engine's step latency, not a request's
	// latency (ServiceSpec.BurstSteps).
	Step bool
	// UpperP99MS is the upper end of the prediction's interval at the
	// predictor's confidence (0: none): what the decision held to the limit.
	UpperP99MS float64
	// Correction is the service's observed correction (1: none): the
	// decision held the prediction (its upper end) × Correction to the limit.
	Correction float64
	// Learned, when above 0, is the ratio the guard learned of this
	// server's observed p99 to the prediction, for the trainer at its
	// percentage on this GPU (guard_response.go): the decision held the point
	// prediction × Learned to the limit instead.
	Learned float64
}

// heldP99 is the p99 a decision holds to the limit: the prediction's upper
// end (the point, when there is none) times the observed correction, or
// the point times the learned ratio.
func (sp ServicePrediction) heldP99() float64 {
	if sp.Learned > 0 {
		return sp.PredictedP99MS * sp.Learned
	}
	return max(sp.PredictedP99MS, sp.UpperP99MS) * max(1, sp.Correction)
}

// Decision is the answer to a Request.
type Decision struct {
	Outcome Outcome
	Code    ReasonCode
	// Message is a sentence a person understands, e.g. "predicted bert p99
	// 18.2 ms exceeds SLO 15 ms even at 10 %".
	Message string
	// Pct is the MPS active-thread percentage granted (100 under time
	// slicing; 0 for a deny). A quote reports it too.
	Pct int
	// Predictions are per service: at the granted percentage for a grant or
	// throttle, at min_pct for a deny on SLO; empty when no prediction was
	// needed (memory, max jobs, health).
	Predictions []ServicePrediction
	// Lease is the lease a grant or throttle created (TokenHash zeroed).
	// Its token is the launcher's: colocd never has it until a renew.
	Lease *Lease
	// Env holds the variables the launcher must set for its processes (see
	// Controller.Env); empty for a deny.
	Env map[string]string
	// Joint, when set, is the joint allocation that lowers live leases to
	// make room for the job (CodeSharedToFit), or that was weighed and
	// found to cost them more than the job adds (a deny).
	Joint *Joint
	// Instance, when set, is the free MIG instance a CodeFreeInstance
	// grant lends whole (also on its Lease).
	Instance *InstanceGrant
}

// InstanceGrant is a MIG instance lent whole to one job: no inference
// service runs on it, and the job shares it with nobody.
type InstanceGrant struct {
	// UUID is the MIG device's ("MIG-…"): the job's CUDA_VISIBLE_DEVICES.
	UUID    string
	Profile string
	SMs     int
	// MemoryMiB is the instance's memory.
	MemoryMiB int
}

// Joint explains a joint allocation: the shadow prices it settled on, what
// each job gets, and the weighted throughput before and after.
type Joint struct {
	// Prices are the shadow prices, in weighted throughput per unit of each
	// resource: the SLO slack the services leave, GPU memory, the
	// max_jobs slots. A price of 0 is a resource with room to spare.
	Prices JointPrices
	// Utility is Σ weight × throughput with the allocation, Before the
	// same with the live leases as they run and without the job.
	Utility, Before float64
	// Shares are the live leases, oldest first, then the job asking.
	Shares []JointShare
}

// JointPrices are a joint allocation's shadow prices, in weighted
// throughput per unit of each resource's capacity.
type JointPrices struct {
	SLO, Memory, Slots float64
}

// JointShare is one job of a joint allocation.
type JointShare struct {
	// LeaseID is the live lease's (empty: the job asking).
	LeaseID, JobID string
	Weight         float64
	// Pct is the allocation's percentage; WasPct the lease's now (0: the
	// job asking).
	Pct, WasPct int
	// Throughput is the job's predicted share of its solo speed with the
	// allocation, WasThroughput without the job asking (0 for that job).
	Throughput, WasThroughput float64
}

// lowers returns the shares whose lease the allocation lowers.
func (j *Joint) lowers() []JointShare {
	if j == nil {
		return nil
	}
	var out []JointShare
	for _, s := range j.Shares {
		if s.LeaseID != "" && s.Pct < s.WasPct {
			out = append(out, s)
		}
	}
	return out
}

// clone returns a deep copy, so a remembered decision cannot be changed
// through a returned one.
func (d Decision) clone() Decision {
	d.Predictions = slices.Clone(d.Predictions)
	if d.Joint != nil {
		j := *d.Joint
		j.Shares = slices.Clone(j.Shares)
		d.Joint = &j
	}
	if d.Lease != nil {
		l := d.Lease.clone()
		d.Lease = &l
	}
	if d.Env != nil {
		env := make(map[string]string, len(d.Env))
		for k, v := range d.Env {
			env[k] = v
		}
		d.Env = env
	}
	return d
}

// Lease is a granted share of the GPU.
type Lease struct {
	// ID is random (128 bits), neither guessable nor sequential.
	ID string
	// TokenHash is the SHA-256 of the lease's token; the token itself is
	// never stored. Zeroed in every copy handed out.
	TokenHash [32]byte
	JobID     string
	Owner     string
	// Tenant is the identity that was granted the lease (Request.Tenant).
	Tenant string
	// RequestHash is the SHA-256 of the identity and request_id that
	// created the lease (requestKey).
	RequestHash [32]byte
	Priority    int
	// Weight is the request's (0 in records from before it was kept: 1).
	Weight float64
	// Checkpointable is copied from the request.
	Checkpointable bool
	// Pct is the MPS active-thread percentage the job may run at (100 in
	// time-slicing mode), what predictions use; MinPct is the lowest the
	// job accepted and MaxPct the highest it asked for (0 in records from
	// before it was kept: then Pct), up to which a raise may offer.
	Pct, MinPct, MaxPct int
	// RunningPct is the percentage the registered processes were started
	// at (0: Pct): a throttle above it asks for no restart, and a raise the
	// launcher ignored leaves it below Pct.
	RunningPct int
	// MemoryMiB is the device memory the job may pin.
	MemoryMiB int
	// Processes is the request's process count (0: unknown); it bounds the
	// PIDs Register accepts.
	Processes int
	// Profile is the job's training profile (treated as immutable).
	Profile *predictor.Profile
	// PIDs are the job's GPU processes, as registered.
	PIDs []int
	// Starts are when each of PIDs started, when the host tells (empty
	// otherwise): eviction ends a PID only while it is still the process
	// that was registered, not a later one that reuses its number.
	Starts []time.Time
	// StartIDs are the processes' ids from the ProcessClock, as Starts.
	StartIDs []uint64
	// RegisteredAt is when PIDs were last registered (zero: never).
	RegisteredAt time.Time
	// ThrottledAt is when the lease was last throttled (zero: never). Until
	// a register after it, the launcher has not shown that its workers
	// restarted at Pct, and past Deadline the lease is revoked and evicted.
	ThrottledAt time.Time
	// Retired are the processes a register replaced: any still on the GPU
	// at its Due (the throttle's deadline, or ThrottleGrace after the
	// register) is evicted.
	Retired []Process
	// Released is set when the launcher released the lease while it had
	// processes: they are evicted, then the lease is gone.
	Released  bool
	CreatedAt time.Time
	ExpiresAt time.Time
	// Duration is the lease's own length: a renewal extends it by this much
	// from the time of renewal (capped at Config.LeaseMax).
	Duration time.Duration
	// Deadline, when set, is when the job must run at Pct after a throttle
	// event (or be gone, if Revoked); enforcement is the SLO guard's.
	Deadline time.Time
	// Revoked leases are not renewed; they expire at their Deadline.
	Revoked bool
	// Revision is the store's revision of this lease (opaque; 0: not stored).
	Revision uint64
	// Instance, when set, is the MIG instance the job holds whole: it runs
	// next to no service, so no prediction counts it, and no guard lowers
	// it (treated as immutable).
	Instance *InstanceGrant
}

// clone returns a deep copy of l (the profile is shared: it is immutable).
func (l *Lease) clone() Lease {
	out := *l
	out.PIDs = slices.Clone(l.PIDs)
	out.Starts = slices.Clone(l.Starts)
	out.StartIDs = slices.Clone(l.StartIDs)
	out.Retired = slices.Clone(l.Retired)
	return out
}

// procs returns the registered processes with their start times.
func (l *Lease) procs() []Process {
	out := make([]Process, len(l.PIDs))
	for i, p := range l.PIDs {
		out[i].PID = p
		if i < len(l.Starts) {
			out[i].Started = l.Starts[i]
		}
		if i < len(l.StartIDs) {
			out[i].StartID = l.StartIDs[i]
		}
	}
	return out
}

// running is the percentage the job's processes run at.
func (l *Lease) running() int {
	if l.RunningPct == 0 {
		return l.Pct
	}
	return l.RunningPct
}

// retiredDue is the earliest Due of the replaced processes (zero: none).
func (l *Lease) retiredDue() time.Time {
	var due time.Time
	for _, p := range l.Retired {
		if due.IsZero() || p.Due.Before(due) {
			due = p.Due
		}
	}
	return due
}

// ceiling is the highest percentage a raise may offer the lease.
func (l *Lease) ceiling() int { return max(l.Pct, l.MaxPct) }

// awaitingRestart reports whether the lease was throttled and its
// launcher has not registered the restarted workers since.
func (l *Lease) awaitingRestart() bool {
	return !l.ThrottledAt.IsZero() && l.RegisteredAt.Before(l.ThrottledAt)
}

// public is the copy handed out: no token material.
func (l *Lease) public() Lease {
	out := l.clone()
	out.TokenHash = [32]byte{}
	return out
}

// ServiceSpec is one inference service on this GPU and its SLO: the p99 of
// latency_ms (arrival to completion) at RateRPS, as `colocd predict` prints;
// for an LLM engine (BurstSteps set), the p99 of its step latency
// (service_ms) at RateRPS steps per second.
type ServiceSpec struct {
	Name    string
	Profile *predictor.Profile
	// Key is Profile.Key(); New and Reconfigure fill it in once, so that
	// no prediction walks the service's ops again.
	Key      predictor.ProfileKey
	RateRPS  float64
	SLOP99MS float64
	// BurstSteps, when set, makes the service an LLM engine: its profile is
	// one engine step, RateRPS counts steps, and SLOP99MS bounds the step
	// latency (predictor.Scenario.BurstSteps).
	BurstSteps float64
	// Correction, when above 1, is how far the server's observed p99 was
	// above the prediction for the leases that ran (the guard measures it):
	// a prediction fits when PredictedP99MS × Correction is within the
	// limit. The config's services leave it 0.
	Correction float64
	// Unmeasured: the guard reads the server's latency, and has not yet
	// measured it next to a training job (since the service's profile last
	// changed); until it has, a new job is granted its min_pct only. The
	// config's services leave it false.
	Unmeasured bool
}

// EngineService is an LLM engine service: its profile one engine step,
// its load busy, the fraction of time the engine has work (as RateRPS,
// steps a second at the step's solo time), burst its mean busy period in
// steps, and sloMS its step p99 SLO.
func EngineService(name string, step *predictor.Profile, busy, burst, sloMS float64) ServiceSpec {
	return ServiceSpec{Name: name, Profile: step, RateRPS: busy * 1e6 / step.SoloUS(), SLOP99MS: sloMS, BurstSteps: burst}
}

// correction is Correction, at least 1.
func (s *ServiceSpec) correction() float64 { return max(1, s.Correction) }

// profileKey is Key, or Profile.Key() when the caller left it zero.
func (s *ServiceSpec) profileKey() predictor.ProfileKey {
	if s.Key != (predictor.ProfileKey{}) {
		return s.Key
	}
	return s.Profile.Key()
}

// EventType names a lease event.
type EventType string

// The lease events published on colocd.v1.<id>.events.<job>.
const (
	// EventThrottle: the lease's percentage was lowered; the launcher
	// restarts its workers at Pct before Deadline.
	EventThrottle EventType = v1.EventThrottle
	// EventRevoke: the lease no longer fits even at its min_pct; the job must
	// stop before Deadline, when the lease expires.
	EventRevoke EventType = v1.EventRevoke
	// EventExpire: the lease expired (not renewed, or revoked and past its
	// deadline) and its capacity is free.
	EventExpire EventType = v1.EventExpire
	// EventRaise: the margin has held long enough for the lease to run at
	// a higher Pct; the launcher may restart its workers at it (and
	// register them) or stay where it is. There is no deadline.
	EventRaise EventType = v1.EventRaise
)

// Event is a change to a lease the launcher must hear about.
type Event struct {
	Type     EventType
	LeaseID  string
	JobID    string
	Pct      int
	Deadline time.Time
	// Env is a throttle's new environment for the job's workers (Env of
	// the lease at its new percentage); nil for other events.
	Env    map[string]string
	Reason string
	Time   time.Time
}

// A lease's state, as status shows it.
const (
	// StateActive: the job runs at its percentage.
	StateActive = "active"
	// StateThrottling: lowered; its workers must restart at the new
	// percentage and be registered by the deadline.
	StateThrottling = "throttling"
	// StateRevoked: it cannot be renewed, and ends at the deadline.
	StateRevoked = "revoked"
	// StateReleased: given back; listed until its processes are gone.
	StateReleased = "released"
)

// State says where the lease is, and until when for a throttled or
// revoked one (zero for an active one).
func (l *Lease) State() (string, time.Time) {
	switch {
	case l.Released:
		return StateReleased, l.Deadline
	case l.Revoked:
		return StateRevoked, l.Deadline
	case l.awaitingRestart() && !l.Deadline.IsZero():
		return StateThrottling, l.Deadline
	}
	return StateActive, time.Time{}
}
