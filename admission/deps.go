package admission

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Device is the GPU as admission needs it (the sidecar passes gpu's adapter).
type Device interface {
	// FreeMemoryMiB is the device's free memory as NVML measures it now.
	FreeMemoryMiB(ctx context.Context) (int, error)
	// Healthy reports whether new work may be placed on the GPU, and why not.
	Healthy() (ok bool, reason string)
}

// ProcessLister is a Device that knows which processes run on the GPU (a
// real one; NVML lists them, MPS clients included). With it, Register
// accepts only the PIDs of processes on this GPU, so a launcher cannot
// point eviction at a process that is not its job's.
type ProcessLister interface {
	// ComputePIDs returns the process ids of the GPU's compute processes
	// and MPS clients, as NVML reports them.
	ComputePIDs(ctx context.Context) ([]int, error)
}

// ProcessClock tells when a host process started. With it, Register
// accepts only processes that started after the lease was granted (or
// throttled): the inference server's processes, and any other that ran
// before, cannot be registered and so can never be evicted.
type ProcessClock interface {
	// StartTime returns when process pid started (to the second), and an
	// id of the process that no later process with the same PID has
	// (Linux: its start in clock ticks after boot, which a step of the
	// wall clock does not move); an error wrapping ErrNoProcess when no
	// such process runs.
	StartTime(pid int) (at time.Time, id uint64, err error)
}

// ProcessEnv is a ProcessClock that also reads a process's environment.
// With it, Register accepts only processes started with the lease's
// COLOCD_LEASE_ID (EnvLeaseID, part of every grant's env): no launcher can
// register, and so have colocd evict, a worker of another job.
type ProcessEnv interface {
	ProcessClock
	// LeaseOf returns the value of COLOCD_LEASE_ID in process pid's
	// environment ("" when unset); an error wrapping ErrNoProcess when no
	// such process runs.
	LeaseOf(pid int) (string, error)
}

// ProcessOwner is a ProcessClock that also tells a process's user. With it
// and an MPSUser, Register accepts only processes of the user the MPS
// server serves (MPS's one-user rule, docs/mps.md#one-user).
type ProcessOwner interface {
	ProcessClock
	// UserOf returns process pid's real user ID; an error wrapping
	// ErrNoProcess when no such process runs.
	UserOf(pid int) (uid int, err error)
}

// MPSUser tells which user the MPS daemon's server serves. An MPS server
// serves one Linux user: a client of another user waits at CUDA init
// until every client of the running server has exited, so a job of
// another user than the inference server's would hang there.
type MPSUser interface {
	// ServerUser returns the running server's UID and PID; ok is false
	// when no server runs or its user cannot be read.
	ServerUser(ctx context.Context) (uid, server int, ok bool)
}

// ErrNoProcess is what a ProcessClock's error wraps for a PID that has no
// running process.
var ErrNoProcess = errors.New("no such process")

// Process is one registered process of a job. Started and StartID are
// zero when the host did not tell; Due, for a replaced process, is when it
// must be gone.
type Process struct {
	PID     int
	Started time.Time
	StartID uint64
	Due     time.Time
}

// Evictor ends a job's GPU work (the sidecar passes the MPS daemon's
// terminate_client). It is used when a lease ends without its launcher's
// release: revoked, throttled and not restarted by the deadline, or
// expired.
type Evictor interface {
	// Evict ends the GPU work of each process that is still an MPS client
	// and still the process that was registered (same start time), never by
	// a signal. A process already gone is not an error; one that could not
	// be terminated is.
	Evict(ctx context.Context, procs []Process) error
}

// Faults reports a fault of the GPU (a non-application XID, a lost GPU)
// or of its MPS server (FAULT), as opposed to a component that merely
// cannot be read. A fault revokes every training lease on the GPU.
type Faults interface {
	Fault() (faulted bool, reason string)
}

// Daemon is the MPS control daemon's health (consulted in MPS mode only).
type Daemon interface {
	Healthy() (ok bool, reason string)
}

// Store persists leases (the sidecar passes a JetStream KV bucket).
type Store interface {
	// Save creates the lease (Revision 0) or updates it if its Revision is
	// still the stored one (compare-and-swap), and sets l.Revision to the new
	// revision. A lost race returns an error wrapping ErrConflict.
	Save(ctx context.Context, l *Lease) error
	// Delete removes the lease; a lease already gone returns an error
	// wrapping ErrNotFound.
	Delete(ctx context.Context, l *Lease) error
	// Load returns every stored lease it can read. Records it cannot read
	// are left out and named in an error wrapping ErrUnreadable, returned
	// with the leases it read.
	Load(ctx context.Context) ([]*Lease, error)
}

// ErrUnreadable marks a Store.Load that skipped records it could not read;
// the leases it returned are still good.
var ErrUnreadable = errors.New("unreadable lease records")

// Events publishes lease events (the sidecar passes a JetStream stream).
type Events interface {
	Publish(ctx context.Context, e Event) error
}

// profileKey is Key, or Profile.Key() when the caller left it zero.
func (t *Trainer) profileKey() predictor.ProfileKey {
	if t.Key != (predictor.ProfileKey{}) {
		return t.Key
	}
	return t.Profile.Key()
}

// Trainer is one training job as a co-runner in a prediction.
type Trainer struct {
	Profile *predictor.Profile
	// Key is Profile.Key(), computed once per lease; the zero key makes the
	// predictor compute it on every call.
	Key predictor.ProfileKey
	// Pct is the job's MPS active-thread percentage (ignored under time
	// slicing).
	Pct int
}

// Latency is a predicted inference p99 (latency_ms, arrival to completion;
// for an engine, the step latency) and the service's solo p99 at the same
// rate.
type Latency struct {
	P99MS     float64
	SoloP99MS float64
	// P99HighMS is the upper end of the p99's interval at the predictor's
	// confidence: what a decision holds to the limit (P99MS when the
	// predictor gives no interval).
	P99HighMS float64
	// Throughput is each trainer's share of its solo speed in the same
	// simulation, in the trainers' order (predictor.TrainingPrediction);
	// nil when the predictor does not say, and joint allocation then
	// does not run.
	Throughput []float64
}

// Predictor predicts the tail latency of svcs[i], one of the inference
// services on the GPU, with all of svcs (each the others' co-runner) and
// the trainers co-located under mode. It must be safe for concurrent use
// when Config.SearchWorkers > 1. *Model is the implementation.
type Predictor interface {
	PredictP99(ctx context.Context, svcs []ServiceSpec, i int, trainers []Trainer, mode predictor.Mode) (Latency, error)
}

// KnowingPredictor is a Predictor that can tell, without simulating,
// whether it already knows a prediction (it has it cached). The percentage
// search then evaluates known points one after another on the caller's
// goroutine instead of fanning them out.
type KnowingPredictor interface {
	Predictor
	Known(svcs []ServiceSpec, i int, trainers []Trainer, mode predictor.Mode) bool
}

// Deps are the components the controller consumes. Daemon may be nil in
// time-slicing mode; Logger (used only by the loops the controller owns:
// expiry) defaults to discarding. The controller reads the system clock;
// tests that move time run it in a testing/synctest bubble.
type Deps struct {
	Device    Device
	Daemon    Daemon
	Store     Store
	Events    Events
	Predictor Predictor
	// Observer, when set, reports the services' observed request rates.
	Observer Observer
	// Processes, when set, tells when a registered process started.
	Processes ProcessClock
	// MPSUser, when set (and Processes is a ProcessOwner), makes Register
	// refuse a process of another user than the MPS server's.
	MPSUser MPSUser
	// Evictor, when set, ends the processes of a lease that ends without a
	// release; without it such a lease is only forgotten.
	Evictor Evictor
	// Faults, when set, is consulted by Guard: a fault revokes every lease.
	Faults Faults
	// Instances, when set, are MIG instances a job may be granted whole
	// instead of sharing the inference server's (lend.go).
	Instances Instances
	Logger    *slog.Logger
	// Clock, when set, is the controller's time: leases' terms, deadlines
	// and expiry, the guard's holds and raises. A replay runs a controller
	// on simulated time by setting it, and calls Expire instead of Run.
	// Nil: time.Now. The deadlines of a decision's own work stay on the
	// wall clock: they bound what it costs.
	Clock func() time.Time
}

// LatencyObserver is an Observer that also reports the server's observed
// tail latency, with which Guard corrects the predictions.
type LatencyObserver interface {
	Observer
	// ObservedWindow is the service's latency figures over what it served
	// from since on (as far back as the observer keeps; a zero since: its
	// last window), and whether they may be decided on (recent, and with
	// enough requests for a p99).
	ObservedWindow(service string, since time.Time) (ObservedWindow, bool)
	// Watches is whether it reads the service's latency at all (its
	// metrics are configured), windows or not yet.
	Watches(service string) bool
}

// ObservedWindow is what a server's own metrics say over one window.
// Figures the window cannot give are NaN, but P99MS is always known.
type ObservedWindow struct {
	// Since and End bound the window.
	Since, End time.Time
	// Requests completed in it, and their rate.
	Requests, RateRPS float64
	MeanMS, P50MS     float64
	P90MS, P99MS      float64
	// P99SureMS is a p99 the latency is above with 95 % confidence given
	// the window's requests (at most P99MS; NaN: take P99MS). The guard
	// corrects a prediction by it alone, not by a p99 of few requests.
	P99SureMS float64
}

// Observer reports what an inference service's own metrics say.
type Observer interface {
	// ObservedRate is the service's request rate over the last window,
	// and whether it may be decided on (recent enough).
	ObservedRate(service string) (rps float64, ok bool)
}
