package v1

import (
	"encoding/json"
	"time"
)

// Decision values of [Decision].Decision.
const (
	// DecisionGrant admits the job at its requested maximum percentage.
	DecisionGrant = "grant"
	// DecisionThrottle admits the job at a lower MPS active-thread percentage.
	DecisionThrottle = "throttle"
	// DecisionDeny refuses the job; Reason says why.
	DecisionDeny = "deny"
)

// Event types of [Event].Type.
const (
	// EventThrottle tells the launcher to restart its workers at a lower
	// percentage before the deadline (a throttle without a deadline asks for
	// no restart: the workers already run at or below it).
	EventThrottle = "throttle"
	// EventRevoke tells the launcher its lease is gone (before the deadline,
	// if any, after which colocd evicts).
	EventRevoke = "revoke"
	// EventExpire tells the launcher its lease expired without renewal.
	EventExpire = "expire"
	// EventRaise offers the launcher a higher percentage: it may restart
	// its workers with the event's env and register them, or ignore it.
	EventRaise = "raise"
)

// AdmitRequest asks a sidecar for a slot on its GPU (subject
// colocd.v1.<id>.admit), or for a quote from every sidecar (colocd.v1.quote).
// Ranges are checked by admission, not here.
type AdmitRequest struct {
	// RequestID makes a retried admit return the same decision. The
	// launcher draws it at random: 22 to 128 letters, digits, '-' or '_'
	// (at least 128 bits). Client.Admit draws one when it is empty.
	RequestID string `json:"request_id"`
	// TokenSHA256 is the lower-case hex SHA-256 of the lease token the
	// launcher drew and keeps (see NewLeaseToken); required by admit. The
	// token itself never travels in an admit or its answer, only in renew,
	// release and register, on subjects no launcher may subscribe to.
	// Client.Admit draws a token when this is empty.
	TokenSHA256 string `json:"token_sha256,omitempty"`
	// token is the secret Client.Admit drew for TokenSHA256, kept so that a
	// retry of the same request sends the same hash.
	token string
	// Job identifies the training job and its owner.
	Job Job `json:"job"`
	// Profile is an inline colocd.profile/v1 training profile; bus passes it
	// through without interpreting it. Exactly one of Profile and
	// ProfileRef is set.
	Profile json.RawMessage `json:"profile,omitempty"`
	// ProfileRef names a profile in the ProfileBucket object store by
	// content ("sha256:<hex>", see ProfileRef): a large profile travels once,
	// not with every admit and quote.
	ProfileRef string `json:"profile_ref,omitempty"`
	// MemoryMiB is the GPU memory the job needs.
	MemoryMiB int `json:"memory_mib"`
	// Processes is the number of GPU client processes the job starts.
	Processes int `json:"processes"`
	// Compute is the acceptable range of MPS active-thread percentages.
	Compute Compute `json:"compute"`
	// LeaseSeconds is the requested lease length; 0 means the sidecar's default.
	LeaseSeconds int `json:"lease_seconds"`
	// Checkpointable says the job can restart from a checkpoint, so it can be
	// throttled instead of revoked.
	Checkpointable bool `json:"checkpointable"`
}

// Job identifies a training job.
type Job struct {
	// ID is the launcher's job id; events for the job are published under it.
	ID string `json:"id"`
	// Owner is the team or user the job belongs to.
	Owner string `json:"owner"`
	// Priority orders jobs; higher is more important.
	Priority int `json:"priority"`
	// Weight is what a unit of the job's throughput is worth when several
	// jobs share the GPU (absent or 0: 1), in (0, 1000].
	Weight float64 `json:"weight,omitempty"`
}

// Compute is a range of MPS active-thread percentages.
type Compute struct {
	// MinPct is the lowest percentage the job accepts.
	MinPct int `json:"min_pct"`
	// MaxPct is the percentage the job asks for.
	MaxPct int `json:"max_pct"`
}

// Decision is a sidecar's answer to an admit or a quote.
type Decision struct {
	// Decision is DecisionGrant, DecisionThrottle or DecisionDeny.
	Decision string `json:"decision"`
	// Reason explains the decision with a stable code and a sentence.
	Reason Reason `json:"reason"`
	// Predictions holds, per inference service, the predicted tail latency
	// with the new job against its SLO.
	Predictions []ServicePrediction `json:"predictions"`
	// ActiveThreadPct is the percentage granted (a grant or throttle, of
	// an admit or a quote; absent for a deny).
	ActiveThreadPct int `json:"active_thread_pct,omitempty"`
	// Lease is set for a granted or throttled admit, never for a quote.
	Lease *Lease `json:"lease,omitempty"`
	// Joint, when present, is the joint allocation behind the decision:
	// the live leases it lowers to make room for the job (reason
	// shared_to_fit; a quote shows what admitting would cost them), or, on
	// a deny, the allocation that would cost them more than the job adds.
	Joint *Joint `json:"joint,omitempty"`
	// Sidecar is the id of the sidecar that answered; set by the service.
	Sidecar string `json:"sidecar"`
}

// Joint explains a joint allocation of the GPU among training jobs by
// shadow prices.
type Joint struct {
	// Prices are the shadow prices it settled on, in weighted throughput
	// per unit of each resource; 0 is a resource with room to spare.
	Prices JointPrices `json:"prices"`
	// WeightedThroughput is Σ weight × throughput with the allocation;
	// WeightedThroughputBefore the same with the live leases as they run,
	// without the job.
	WeightedThroughput       float64 `json:"weighted_throughput"`
	WeightedThroughputBefore float64 `json:"weighted_throughput_before"`
	// Jobs are the live leases, oldest first, then the job asking.
	Jobs []JointJob `json:"jobs"`
}

// JointPrices are a joint allocation's shadow prices: the SLO slack the
// inference services leave, GPU memory, the max_jobs slots.
type JointPrices struct {
	SLO    float64 `json:"slo"`
	Memory float64 `json:"memory"`
	Slots  float64 `json:"slots"`
}

// JointJob is one job of a joint allocation.
type JointJob struct {
	JobID string `json:"job_id"`
	// LeaseID is the live lease's; absent for the job asking.
	LeaseID string  `json:"lease_id,omitempty"`
	Weight  float64 `json:"weight"`
	// Pct is its active-thread percentage in the allocation; WasPct the
	// lease's now (absent for the job asking).
	Pct    int `json:"pct"`
	WasPct int `json:"was_pct,omitempty"`
	// Throughput is its predicted share of its solo speed in the
	// allocation; WasThroughput its share now (absent for the job asking).
	Throughput    float64 `json:"throughput"`
	WasThroughput float64 `json:"was_throughput,omitempty"`
	// Utility is its weight × throughput in the allocation: its part of
	// weighted_throughput.
	Utility float64 `json:"utility"`
}

// Reason codes of [Reason].Code in a decision: stable and machine-readable,
// never renamed.
const (
	// ReasonMeasureFirst is the code of a throttle to the job's min_pct
	// because the sidecar has not yet measured its servers next to a
	// training job: the raise that follows is the percentage the job was
	// to have, and a launcher should take it (docs/guard.md).
	ReasonMeasureFirst = "measure_first"
	// ReasonFits: grant: every service within its limit at max_pct.
	ReasonFits = "fits"
	// ReasonFreeInstance: grant: a free MIG instance, lent whole; nothing is co-located.
	ReasonFreeInstance = "free_instance"
	// ReasonThrottledToFit: throttle: only a lower percentage fits.
	ReasonThrottledToFit = "throttled_to_fit"
	// ReasonSharedToFit: grant or throttle (MPS): it fits once live leases are lowered, by joint allocation.
	ReasonSharedToFit = "shared_to_fit"
	// ReasonSLOViolation: deny (MPS): a service exceeds its limit even at min_pct.
	ReasonSLOViolation = "slo_violation"
	// ReasonTimesliceNoFit: deny (time slicing): a service exceeds its limit.
	ReasonTimesliceNoFit = "timeslice_no_fit"
	// ReasonInsufficientMemory: deny: not enough free device memory.
	ReasonInsufficientMemory = "insufficient_memory"
	// ReasonMaxJobs: deny: the GPU already runs the maximum number of jobs.
	ReasonMaxJobs = "max_jobs"
	// ReasonRecentRevoke: deny: the guard revoked a lease for the servers' load or latency a short while ago; retry later.
	ReasonRecentRevoke = "recent_revoke"
	// ReasonIdentityQuota: deny or throttle: the launcher identity's quota (admission.identity) leaves no more room.
	ReasonIdentityQuota = "identity_quota"
	// ReasonDraining: deny: the operator drained the sidecar (colocd drain) until colocd undrain.
	ReasonDraining = "draining"
	// ReasonGPUUnhealthy: unavailable: the GPU is unhealthy or unreadable.
	ReasonGPUUnhealthy = "gpu_unhealthy"
	// ReasonDaemonUnhealthy: unavailable: the MPS daemon is unhealthy.
	ReasonDaemonUnhealthy = "daemon_unhealthy"
	// ReasonPredictorUnhealthy: unavailable: a prediction failed.
	ReasonPredictorUnhealthy = "predictor_unhealthy"
	// ReasonStoreUnavailable: unavailable: the lease could not be stored.
	ReasonStoreUnavailable = "store_unavailable"
	// ReasonBusy: unavailable: the leases kept changing while the decision predicted; retry.
	ReasonBusy = "busy"
)

// Reason explains a decision or an error.
type Reason struct {
	// Code is stable and machine-readable.
	Code string `json:"code"`
	// Message is a sentence a person understands.
	Message string `json:"message"`
}

// ServicePrediction is the predicted p99 latency of one inference service.
type ServicePrediction struct {
	// Service is the inference service's name.
	Service string `json:"service"`
	// RateRPS is the request rate predicted at: the configured one, or the
	// observed one (rounded up to a 5 % band) when that is higher.
	RateRPS float64 `json:"rate_rps"`
	// SLOP99MS is the service's SLO on p99 latency, in milliseconds.
	SLOP99MS float64 `json:"slo_p99_ms"`
	// SLOMetric, when present, is "step": the service is an LLM engine and
	// every figure here is its step latency (inter-token latency), not a
	// request's latency.
	SLOMetric string `json:"slo_metric,omitempty"`
	// SoloP99MS is the predicted p99 with no training job, in milliseconds.
	SoloP99MS float64 `json:"solo_p99_ms"`
	// PredictedP99MS is the predicted p99 with the current leases and the
	// requested job, in milliseconds.
	PredictedP99MS float64 `json:"predicted_p99_ms"`
	// PredictedP99UpperMS, when present, is the upper end of the
	// prediction's interval at the predictor's confidence (the simulated
	// requests' sampling error and the calibration's parameter
	// uncertainty): what the decision held to the limit.
	PredictedP99UpperMS float64 `json:"predicted_p99_upper_ms,omitempty"`
	// Correction, when present, is how far the server's own p99 was above
	// the prediction: the decision held predicted_p99_upper_ms (else
	// predicted_p99_ms) × correction to the SLO less headroom.
	Correction float64 `json:"correction,omitempty"`
}

// Lease is a granted slot on a GPU. The token that proves ownership on
// renew, release and register is the launcher's own: it is never in a
// Lease on the wire.
type Lease struct {
	// ID names the lease.
	ID string `json:"id"`
	// Token is the lease's secret as Client.Admit drew it; filled in on the
	// launcher's side only, never encoded.
	Token string `json:"-"`
	// JobID is the job the lease was granted to.
	JobID string `json:"job_id"`
	// Owner is the job's owner.
	Owner string `json:"owner"`
	// ExpiresAt is when the lease ends unless renewed.
	ExpiresAt time.Time `json:"expires_at"`
	// ActiveThreadPct is the MPS active-thread percentage granted.
	ActiveThreadPct int `json:"active_thread_pct"`
	// PinnedMemLimitMiB is the MPS pinned device memory limit granted.
	PinnedMemLimitMiB int `json:"pinned_mem_limit_mib"`
	// Env holds the exact variables the launcher must set for its workers
	// (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, ...).
	Env map[string]string `json:"env"`
	// PIDs are the client processes registered for the lease.
	PIDs []int `json:"pids,omitempty"`
	// Instance, when set, is the MIG instance the job holds whole (reason
	// free_instance): it runs alone there, without MPS, and
	// ActiveThreadPct and PinnedMemLimitMiB do not apply.
	Instance *Instance `json:"instance,omitempty"`
	// State is "active"; "throttling" (lowered: its workers must restart
	// at ActiveThreadPct and be registered by Deadline); "revoked" (it
	// ends at Deadline); or "released" (given back, listed until its
	// processes are gone). Set in status and renew answers.
	State    string     `json:"state,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// MPSServerUID, in a grant, is the user the GPU's MPS server serves
	// when one runs: an MPS server serves one user, and a worker of
	// another would wait at CUDA init. Absent when no server runs or its
	// user is unknown (docs/mps.md#one-user).
	MPSServerUID *int `json:"mps_server_uid,omitempty"`
}

// Instance is a MIG instance lent whole to one job.
type Instance struct {
	// UUID is the MIG device's: the job's CUDA_VISIBLE_DEVICES.
	UUID string `json:"uuid"`
	// Profile is its GPU instance profile, e.g. "3g.71gb".
	Profile string `json:"profile"`
	SMs     int    `json:"sms"`
	// MemoryMiB is the instance's memory: all of it is the job's.
	MemoryMiB int `json:"memory_mib"`
}

// LeaseRef names a lease and proves ownership (renew, release).
type LeaseRef struct {
	// LeaseID names the lease.
	LeaseID string `json:"lease_id"`
	// Token is the lease's secret.
	Token string `json:"token"`
}

// RegisterRequest tells the sidecar which client processes run under a
// lease, so that it can evict them through MPS when it must.
type RegisterRequest struct {
	// LeaseID names the lease.
	LeaseID string `json:"lease_id"`
	// Token is the lease's secret.
	Token string `json:"token"`
	// PIDs are the job's GPU client process ids.
	PIDs []int `json:"pids"`
}

// Status is a sidecar's state, as answered on colocd.v1.<id>.status.
type Status struct {
	// Sidecar is the sidecar's id; set by the service.
	Sidecar string `json:"sidecar"`
	// GPU describes the device the sidecar guards.
	GPU GPUStatus `json:"gpu"`
	// Mode is the sharing mode: "mps" or "timeslice".
	Mode string `json:"mode"`
	// Ready is true when the sidecar admits new jobs (NATS, GPU, MPS daemon
	// and predictor healthy).
	Ready bool `json:"ready"`
	// Health maps each component ("nats", "gpu", "mps", "predictor", ...)
	// to "ok" or the reason it is unhealthy.
	Health map[string]string `json:"health"`
	// Services are the inference services on the GPU.
	Services []ServiceStatus `json:"services"`
	// Leases are the live leases; the service strips their tokens.
	Leases []Lease `json:"leases"`
	// ConfigRejected is the last edit of the config file that was not
	// applied (the configuration before it is in force); absent when the
	// last edit was applied.
	ConfigRejected *ConfigRejection `json:"config_rejected,omitempty"`
	// MPS is the MPS daemon's servers at its last probe; absent under
	// time slicing.
	MPS *MPSStatus `json:"mps,omitempty"`
	// Draining is the operator's drain in force (colocd drain): every
	// admit is denied "draining" and the leases were revoked. Absent when
	// the sidecar admits.
	Draining *DrainStatus `json:"draining,omitempty"`
}

// DrainStatus is a drain in Status.
type DrainStatus struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
}

// MPSStatus describes the MPS daemon in Status.
type MPSStatus struct {
	// Servers are the daemon's servers: one serves one Linux user, and
	// a client of another user waits until every client of it has exited.
	Servers []MPSServer `json:"servers"`
}

// MPSServer is one MPS server in Status.
type MPSServer struct {
	PID int `json:"pid"`
	// UID is the user the server serves; absent when it cannot be read.
	UID *int `json:"uid,omitempty"`
	// State is get_server_status's answer (ACTIVE, FAULT, ...).
	State string `json:"state"`
}

// GPUStatus describes a GPU in Status. Fields the sidecar does not know are
// left zero.
type GPUStatus struct {
	// UUID is the device's UUID.
	UUID string `json:"uuid"`
	// Name is the device's product name.
	Name string `json:"name"`
	// MemoryTotalMiB is the device's memory.
	MemoryTotalMiB int `json:"memory_total_mib"`
	// MemoryFreeMiB is the free memory NVML reports.
	MemoryFreeMiB int `json:"memory_free_mib"`
}

// ServiceStatus is one inference service in Status.
type ServiceStatus struct {
	// Name is the service's name.
	Name string `json:"name"`
	// RateRPS is the service's configured request rate.
	RateRPS float64 `json:"rate_rps"`
	// SLOP99MS is the service's SLO on p99 latency, in milliseconds.
	SLOP99MS float64 `json:"slo_p99_ms"`
	// SLOMetric, when present, is "step" (see ServicePrediction).
	SLOMetric string `json:"slo_metric,omitempty"`
	// PredictedP99MS is the predicted p99 with the current leases.
	PredictedP99MS float64 `json:"predicted_p99_ms"`
	// PredictedP99UpperMS is its interval's upper end (see
	// ServicePrediction).
	PredictedP99UpperMS float64 `json:"predicted_p99_upper_ms,omitempty"`
	// PredictedAtRPS is the rate that prediction used: RateRPS, or the
	// observed rate's band when that is higher.
	PredictedAtRPS float64 `json:"predicted_at_rps"`
	// Correction, when present, is how far the server's own p99 was above
	// the prediction for the leases that ran (see ServicePrediction).
	Correction float64 `json:"correction,omitempty"`
	// Guard is what the guard decides this service on: "configured" (the
	// config's rate: no metrics, or none usable), "observed" (the server's
	// own load), "corrected" (its load and its p99, which showed the
	// prediction low), or "fault" (a GPU or MPS fault: no lease is kept).
	Guard string `json:"guard"`
	// Observed is what the service's server reports about itself, when
	// its metrics are configured.
	Observed *ObservedStatus `json:"observed,omitempty"`
	// Response is what the guard learned of this service's observed p99
	// beside one training job at each percentage
	// (admission.guard.learn_response), by trainer and percentage.
	Response []ResponsePoint `json:"response,omitempty"`
}

// ResponsePoint is one learned percentage of one trainer in
// ServiceStatus.
type ResponsePoint struct {
	// Trainer is the training profile's name, or the start of its key.
	Trainer string `json:"trainer"`
	Pct     int    `json:"pct"`
	// Ratio is the observed p99 over the point prediction that decisions
	// at Pct use, learned from Windows windows, the last ending at Last.
	Ratio   float64   `json:"ratio"`
	Windows int       `json:"windows"`
	Last    time.Time `json:"last"`
}

// ObservedStatus is a window of the server's own metrics. Figures the
// window cannot give (no request, no histogram) are null.
type ObservedStatus struct {
	// State is no_data, fresh, stale (scrapes fail; the last good window
	// is still used) or expired (nothing observed is used).
	State string `json:"state"`
	// Reason says why, in one sentence.
	Reason string `json:"reason"`
	// AgeSeconds is the time since the last good scrape.
	AgeSeconds float64 `json:"age_s"`
	// WindowSeconds is the time the figures cover.
	WindowSeconds float64  `json:"window_s"`
	RateRPS       *float64 `json:"rate_rps"`
	// ForecastRPS is the rate forecast 30 s ahead (Holt's linear trend).
	ForecastRPS *float64 `json:"forecast_rps"`
	MeanMS      *float64 `json:"mean_ms"`
	P99MS       *float64 `json:"p99_ms"`
	// P99LowMS and P99HighMS bound the histogram bucket the p99 fell in.
	P99LowMS  *float64 `json:"p99_low_ms,omitempty"`
	P99HighMS *float64 `json:"p99_high_ms,omitempty"`
}

// Event tells a launcher that one of its leases changed. Events are kept in
// a JetStream stream so that a launcher that was away can read what it
// missed (see [Events] and [Client.Events]).
type Event struct {
	// Type is EventThrottle, EventRevoke, EventExpire or EventRaise.
	Type string `json:"type"`
	// LeaseID names the lease.
	LeaseID string `json:"lease_id"`
	// JobID is the job the lease belongs to.
	JobID string `json:"job_id"`
	// ActiveThreadPct is the new percentage of a throttle or raise.
	ActiveThreadPct int `json:"active_thread_pct,omitempty"`
	// Deadline is when colocd evicts the job's processes if they still run
	// (throttle: at the old percentage).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Env is a throttle's or raise's new environment for the job's
	// workers: restart them with it and register their PIDs (before
	// Deadline, for a throttle that has one).
	Env map[string]string `json:"env,omitempty"`
	// Reason is a sentence a person understands.
	Reason string `json:"reason"`
	// Time is when the event happened.
	Time time.Time `json:"time"`
}

// ConfigRejection is an edit of a sidecar's config file that it rejected.
type ConfigRejection struct {
	At    time.Time `json:"at"`
	Error string    `json:"error"`
}
