package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/mps"
	"github.com/colocd/colocd/predictor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The adapters below give admission the small interfaces it declares.
var (
	_ admission.Device           = deviceAdapter{}
	_ admission.Daemon           = daemonAdapter{}
	_ admission.Store            = (*kvStore)(nil)
	_ admission.Events           = (*eventSink)(nil)
	_ admission.KnowingPredictor = (*tracedPredictor)(nil)
)

// deviceAdapter reads free memory and health from the GPU.
type deviceAdapter struct{ dev gpu.Device }

func (d deviceAdapter) FreeMemoryMiB(ctx context.Context) (int, error) {
	st, err := d.dev.State(ctx)
	if err != nil {
		return 0, err
	}
	return int(st.Memory.FreeMiB), nil
}

func (d deviceAdapter) Healthy() (bool, string) {
	h := d.dev.Health()
	return h.Healthy, h.Reason
}

// processAdapter is deviceAdapter for a real GPU: it also lists the GPU's
// processes, so that register accepts only PIDs that run on it. A
// simulated GPU knows no launcher's processes and gets deviceAdapter.
type processAdapter struct{ deviceAdapter }

var _ admission.ProcessLister = processAdapter{}

// ComputePIDs returns NVML's compute processes and MPS clients of the GPU
// (under MPS, NVML lists the server among the first and the clients among
// the second), in the host's PID namespace.
func (d processAdapter) ComputePIDs(ctx context.Context) ([]int, error) {
	st, err := d.dev.State(ctx)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(st.Processes)+len(st.MPSProcesses))
	for _, p := range append(st.Processes, st.MPSProcesses...) {
		pids = append(pids, int(p.PID))
	}
	return pids, nil
}

// instancesAdapter gives admission the MIG instances of gpu.grant_instances.
type instancesAdapter struct{ l gpu.Lender }

var _ admission.Instances = instancesAdapter{}

func (a instancesAdapter) Lendable(ctx context.Context) ([]admission.Instance, error) {
	ls, err := a.l.Lendable(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admission.Instance, len(ls))
	for i, l := range ls {
		out[i] = admission.Instance{UUID: l.UUID, Profile: l.MIG.Profile, SMs: l.SMs,
			MemoryMiB: int(l.Memory.TotalMiB), UsedMiB: int(l.Memory.UsedMiB), FreeMiB: int(l.Memory.FreeMiB), Fault: l.Fault}
		for _, p := range l.Processes {
			out[i].PIDs = append(out[i].PIDs, int(p.PID))
		}
	}
	return out, nil
}

// admissionDevice is the adapter admission gets for dev: one that lists
// compute processes when dev's are the host's (gpu.HostProcesses).
func admissionDevice(dev gpu.Device) admission.Device {
	if gpu.HostProcesses(dev) {
		return processAdapter{deviceAdapter{dev}}
	}
	return deviceAdapter{dev}
}

// mpsDaemon is what the sidecar uses of the MPS daemon, real or simulated.
type mpsDaemon interface {
	mpsClients
	Ensure(ctx context.Context) error
	Run(ctx context.Context) error
	Close(ctx context.Context) error
	Health() mps.Health
}

var (
	_ mpsDaemon = (*mps.Control)(nil)
	_ mpsDaemon = (*mps.Sim)(nil)
)

// daemonAdapter reports the MPS daemon's health.
type daemonAdapter struct{ d mpsDaemon }

func (d daemonAdapter) Healthy() (bool, string) {
	h := d.d.Health()
	if h.Ready() {
		return true, ""
	}
	return false, fmt.Sprintf("mps daemon %s: %s", h.State, h.Reason)
}

// faultAdapter reports a fault of the GPU (a non-application XID, a lost
// GPU) or of the MPS daemon (a server in FAULT); a GPU or daemon that only
// cannot be read is no fault.
type faultAdapter struct {
	gpu    gpu.Device
	daemon mpsDaemon // nil in time-slicing mode
}

var _ admission.Faults = faultAdapter{}

// faults is the fault adapter of the sidecar's GPU and daemon.
func (s *Sidecar) faults() faultAdapter { return faultAdapter{gpu: s.gpu, daemon: s.daemon} }

func (f faultAdapter) Fault() (bool, string) {
	if h := f.gpu.Health(); !h.Healthy && h.Fault {
		return true, "gpu: " + h.Reason
	}
	if f.daemon != nil {
		if h := f.daemon.Health(); h.State == mps.StateFault {
			return true, "mps server in FAULT: " + h.Reason
		}
	}
	return false, ""
}

// Bounds on lease store calls: a store that does not answer (a full disk, a
// lost JetStream server) fails the call quickly instead of holding it.
const (
	storeCallTimeout = 2 * time.Second
	storeLoadTimeout = 30 * time.Second
)

// inlineProfileMax is the largest profile (as JSON) a lease record holds
// inline; a larger one goes to the profile store.
const inlineProfileMax = 64 << 10

// kvStore keeps leases in the sidecar's JetStream KV bucket, one key per
// lease, with compare-and-swap on the revision. The bucket can be replaced
// (reopen) when it was lost. Large profiles go to profs, once each.
type kvStore struct {
	profs *bus.ProfileStore
	// health hears of every write's outcome (nil: no one): a store that
	// reads but cannot write makes the sidecar not ready.
	health *servingHealth

	mu   sync.Mutex
	kv   *bus.KV
	refs map[*predictor.Profile]storedRef // profiles already in profs (parsed profiles are immutable)
}

// storedRef is where a lease's profile is: ref "" for inline, else its
// reference in the profile store, last put at (zero: not by this process).
type storedRef struct {
	ref string
	at  time.Time
}

// refreshAfter is how often a lease's record puts its profile again: the
// put restarts the profile's age only once that is past half of
// bus.ProfileStoreMaxAge, so a profile in use never ages out.
const refreshAfter = bus.ProfileStoreMaxAge / 4

// record is the stored form of l, with a large profile put in the profile
// store and named by reference.
func (s *kvStore) record(ctx context.Context, l *admission.Lease) ([]byte, error) {
	sl := admission.NewStoredLease(l)
	if s.profs != nil && l.Profile != nil {
		s.mu.Lock()
		sr, ok := s.refs[l.Profile]
		s.mu.Unlock()
		if !ok || (sr.ref != "" && time.Since(sr.at) > refreshAfter) {
			raw, err := json.Marshal(l.Profile)
			if err != nil {
				return nil, err
			}
			sr = storedRef{at: time.Now()}
			if len(raw) > inlineProfileMax {
				if sr.ref, err = s.profs.Put(ctx, raw); err != nil {
					return nil, err
				}
			}
			s.remember(l.Profile, sr)
		}
		if sr.ref != "" {
			sl.Profile, sl.ProfileRef = nil, sr.ref
		}
	}
	return json.Marshal(sl)
}

func (s *kvStore) bucket() *bus.KV {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kv
}

func (s *kvStore) replace(kv *bus.KV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kv = kv
}

func (s *kvStore) Save(ctx context.Context, l *admission.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	data, err := s.record(ctx, l)
	if err != nil {
		return fmt.Errorf("save lease %s: %w", l.ID, err)
	}
	var rev uint64
	if l.Revision == 0 {
		rev, err = s.bucket().Create(ctx, l.ID, data)
	} else {
		rev, err = s.bucket().Update(ctx, l.ID, data, l.Revision)
	}
	if bus.Unacknowledged(err) {
		if r, ok := s.landed(ctx, l.ID, data); ok {
			rev, err = r, nil
		}
	}
	switch {
	case errors.Is(err, bus.ErrExists), errors.Is(err, bus.ErrRevisionMismatch):
		return fmt.Errorf("save lease %s: %w: %w", l.ID, admission.ErrConflict, err)
	case err != nil:
		err = fmt.Errorf("save lease %s: %w", l.ID, err)
		s.wrote(err)
		return err
	}
	s.wrote(nil)
	l.Revision = rev
	return nil
}

// wrote tells health of a write's outcome; a conflict is no failure of the
// store's.
func (s *kvStore) wrote(err error) {
	if s.health != nil {
		s.health.wrote(err, time.Now())
	}
}

func (s *kvStore) Delete(ctx context.Context, l *admission.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	err := s.bucket().Delete(ctx, l.ID, l.Revision)
	// A delete whose acknowledgement was lost landed all the same when the
	// key is gone; a retry of it then finds the revision moved (its own
	// delete marker). Either way the lease is deleted.
	if (bus.Unacknowledged(err) || errors.Is(err, bus.ErrRevisionMismatch)) && s.gone(ctx, l.ID) {
		return nil
	}
	switch {
	case errors.Is(err, bus.ErrNoKey):
		return fmt.Errorf("delete lease %s: %w", l.ID, admission.ErrNotFound)
	case errors.Is(err, bus.ErrRevisionMismatch):
		return fmt.Errorf("delete lease %s: %w: %w", l.ID, admission.ErrConflict, err)
	}
	s.wrote(err)
	return err
}

// settleTimeout bounds the read that settles a write whose outcome is
// unknown.
const settleTimeout = 2 * time.Second

// landed reports whether a save of lease id whose acknowledgement was lost
// is in the store after all (the record there is want), and its revision.
func (s *kvStore) landed(ctx context.Context, id string, want []byte) (uint64, bool) {
	got, rev, err := s.settle(ctx, id)
	return rev, err == nil && bytes.Equal(got, want)
}

// gone reports whether lease id has no record in the store now.
func (s *kvStore) gone(ctx context.Context, id string) bool {
	_, _, err := s.settle(ctx, id)
	return errors.Is(err, bus.ErrNoKey)
}

// settle reads lease id as the store has it now, with a deadline of its
// own: the write it settles may have spent the caller's.
func (s *kvStore) settle(ctx context.Context, id string) ([]byte, uint64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	return s.bucket().Get(ctx, id)
}

func (s *kvStore) Load(ctx context.Context) ([]*admission.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, storeLoadTimeout)
	defer cancel()
	entries, err := s.bucket().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("load leases: %w", err)
	}
	out := make([]*admission.Lease, 0, len(entries))
	var bad []error
	for _, e := range entries {
		var sl admission.StoredLease
		if err := json.Unmarshal(e.Value, &sl); err != nil {
			bad = append(bad, fmt.Errorf("lease %q: %w", e.Key, err))
			continue
		}
		if sl.ID != e.Key {
			bad = append(bad, fmt.Errorf("lease %q: the record names lease %q", e.Key, clipID(sl.ID)))
			continue
		}
		if sl.ProfileRef != "" {
			if sl.Profile, err = s.loadProfile(ctx, sl.ProfileRef); err != nil {
				bad = append(bad, fmt.Errorf("lease %q: %w", e.Key, err))
				continue
			}
		}
		l, err := sl.Lease(e.Revision)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, l)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("load leases: %w: %w", admission.ErrUnreadable, errors.Join(bad...))
	}
	return out, nil
}

// loadProfile reads and parses a lease's profile from the profile store.
func (s *kvStore) loadProfile(ctx context.Context, ref string) (*predictor.Profile, error) {
	if s.profs == nil {
		return nil, fmt.Errorf("profile_ref %s: no profile store", clipID(ref))
	}
	raw, err := s.profs.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	p, err := predictor.ParseProfile(raw)
	if err != nil {
		return nil, fmt.Errorf("profile_ref %s: %w", ref, err)
	}
	s.remember(p, storedRef{ref: ref})
	return p, nil
}

// remember notes where p is stored.
func (s *kvStore) remember(p *predictor.Profile, sr storedRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == nil || len(s.refs) >= 1024 {
		s.refs = map[*predictor.Profile]storedRef{} // bounded: start over
	}
	s.refs[p] = sr
}

// clipID bounds what a log quotes of an untrusted id.
func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// eventSink publishes admission's events on the JetStream stream and
// counts them; after lets the sidecar react (the simulated GPU follows).
type eventSink struct {
	events  *bus.Events
	metrics *metrics
	after   func()
	log     *slog.Logger // one INFO line per event (nil: none)
}

func (e *eventSink) Publish(ctx context.Context, ev admission.Event) error {
	we := v1.Event{Type: string(ev.Type), LeaseID: ev.LeaseID, JobID: ev.JobID, ActiveThreadPct: ev.Pct, Env: ev.Env, Reason: ev.Reason, Time: ev.Time}
	if !ev.Deadline.IsZero() {
		d := ev.Deadline
		we.Deadline = &d
	}
	err := e.events.Publish(ctx, we)
	if err == nil {
		e.metrics.events.Add(ctx, 1, metricAttrs("type", string(ev.Type)))
	}
	if e.log != nil {
		attrs := []any{"job", clipID(ev.JobID), "lease", ev.LeaseID, "reason", ev.Reason}
		if ev.Pct > 0 {
			attrs = append(attrs, "pct", ev.Pct)
		}
		if !ev.Deadline.IsZero() {
			attrs = append(attrs, "deadline", ev.Deadline.UTC().Format(time.RFC3339))
		}
		if err != nil {
			attrs = append(attrs, "publish_err", err)
		}
		e.log.Info("lease "+eventVerb(string(ev.Type)), attrs...)
	}
	if e.after != nil {
		e.after()
	}
	return err
}

// tracedPredictor wraps the model with a span and a duration per prediction.
type tracedPredictor struct {
	inner   admission.Predictor
	tracer  trace.Tracer
	metrics *metrics
}

// Known asks the model, without a span: it is a cache lookup.
func (p *tracedPredictor) Known(svcs []admission.ServiceSpec, i int, trainers []admission.Trainer, mode predictor.Mode) bool {
	kp, ok := p.inner.(admission.KnowingPredictor)
	return ok && kp.Known(svcs, i, trainers, mode)
}

func (p *tracedPredictor) PredictP99(ctx context.Context, svcs []admission.ServiceSpec, i int, trainers []admission.Trainer, mode predictor.Mode) (admission.Latency, error) {
	if i < 0 || i >= len(svcs) {
		return admission.Latency{}, fmt.Errorf("predict: service %d of %d", i, len(svcs))
	}
	svc := svcs[i]
	ctx, span := p.tracer.Start(ctx, "colocd.predict", trace.WithAttributes(
		attribute.String("colocd.service", svc.Name), attribute.String("colocd.mode", string(mode)),
		attribute.Int("colocd.trainers", len(trainers))))
	defer span.End()
	if len(trainers) > 0 {
		span.SetAttributes(attribute.Int("colocd.candidate_pct", trainers[len(trainers)-1].Pct))
	}
	start := time.Now()
	lat, err := p.inner.PredictP99(ctx, svcs, i, trainers, mode)
	p.metrics.predictionS.Record(ctx, since(start), metricAttrs("service", svc.Name))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return lat, err
	}
	span.SetAttributes(attribute.Float64("colocd.predicted_p99_ms", lat.P99MS), attribute.Float64("colocd.slo_p99_ms", svc.SLOP99MS))
	return lat, nil
}

// eventVerb is what an event did to its lease, for the log.
func eventVerb(t string) string {
	switch t {
	case v1.EventThrottle:
		return "throttled"
	case v1.EventRevoke:
		return "revoked"
	case v1.EventExpire:
		return "expired"
	case v1.EventRaise:
		return "raised"
	}
	return t
}
