package sidecar

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/cache"
	"github.com/colocd/colocd/predictor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

var _ bus.Handler = (*handler)(nil)

// handler serves the NATS API with the admission controller: it maps the
// wire types, traces each call and records its metrics.
type handler struct {
	s        *Sidecar
	profiles *profileCache
}

// busError maps admission's errors to the API's codes.
func busError(err error) error {
	var be *v1.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &be):
		return err
	case errors.Is(err, admission.ErrInvalid):
		return v1.BadRequest(err.Error())
	case errors.Is(err, admission.ErrForbidden):
		return v1.Forbidden(err.Error())
	case errors.Is(err, admission.ErrNotFound):
		return v1.NotFound(err.Error())
	case errors.Is(err, admission.ErrConflict):
		return v1.Conflict(err.Error())
	case errors.Is(err, admission.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		// Before ErrUnavailable: a lease store call that ran out of the
		// caller's time is a timeout, not an unhealthy store.
		return v1.Timeout(err.Error())
	case errors.Is(err, admission.ErrUnavailable):
		return v1.Unavailable(err.Error())
	}
	return err
}

// profileCache keeps parsed profiles, and their prediction keys, by the
// SHA-256 of their bytes, which for a profile sent by reference is the
// reference itself: launchers send the same job profile again and again
// (retries, quotes, many jobs of one kind), and parsing a real one (870 ops,
// 200 KB) costs milliseconds where hashing it costs a tenth of that. Parsed
// profiles are never modified, so sharing them is safe.
//
// It is bounded by the memory of what it holds (profileCacheBytes, as
// parsedBytes estimates it), least recently used out first: a few large
// profiles cannot hold hundreds of megabytes, and a profile larger than the
// whole budget is parsed for each request and not kept.
type profileCache = cache.LRU[[32]byte, parsedProfile]

// newProfileCache returns an empty profile cache of budget bytes.
func newProfileCache(budget int) *profileCache {
	return cache.New[[32]byte, parsedProfile](budget)
}

type parsedProfile struct {
	p   *predictor.Profile
	key predictor.ProfileKey
}

// profileCacheBytes bounds the parsed profiles a sidecar keeps: some 250
// copies of the 870-kernel step in testdata, or 4 of the largest profile a
// request may carry.
const profileCacheBytes = 64 << 20

// parsedBytes estimates the memory of a parsed profile: its ops, their
// names and memory intensities, and its notes.
func parsedBytes(p *predictor.Profile) int {
	n := int(unsafe.Sizeof(*p)) + len(p.Name) + len(p.Format) + len(p.Device.Name)
	for i := range p.Ops {
		op := &p.Ops[i]
		n += int(unsafe.Sizeof(*op)) + len(op.Name)
		if op.DRAM != nil {
			n += 8
		}
		if op.L2 != nil {
			n += 8
		}
	}
	for _, note := range p.Notes {
		n += int(unsafe.Sizeof(note)) + len(note)
	}
	return n
}

// parseProfile parses raw, whose SHA-256 is sum, and keeps the result in
// profiles if it fits.
func parseProfile(profiles *profileCache, sum [32]byte, raw []byte) (parsedProfile, error) {
	p, err := predictor.ParseProfile(raw)
	if err != nil {
		return parsedProfile{}, err
	}
	return profiles.Add(sum, parsedProfile{p: p, key: p.Key()}, parsedBytes(p)), nil
}

// profile returns the request's profile, parsed: the inline one, or the one
// its profile_ref names in the profile store. The request's shape (one of
// the two, well formed) is checked where it is decoded, CheckShape.
func (h *handler) profile(ctx context.Context, r *v1.AdmitRequest) (parsedProfile, error) {
	if err := r.CheckShape(); err != nil { // a request that did not come off the wire
		return parsedProfile{}, err
	}
	if r.ProfileRef == "" {
		sum := sha256.Sum256(r.Profile)
		if pp, ok := h.profiles.Get(sum); ok {
			return pp, nil
		}
		pp, err := parseProfile(h.profiles, sum, r.Profile)
		if err != nil {
			return parsedProfile{}, v1.BadRequest("profile: " + err.Error())
		}
		return pp, nil
	}
	sum, _ := v1.ParseProfileRef(r.ProfileRef) // well formed: CheckShape
	if pp, ok := h.profiles.Get(sum); ok {
		return pp, nil
	}
	raw, err := h.s.profs.Get(ctx, r.ProfileRef)
	switch {
	case errors.Is(err, bus.ErrProfileNotFound):
		return parsedProfile{}, v1.NotFound(err.Error())
	case errors.Is(err, bus.ErrProfileTooLarge), errors.Is(err, bus.ErrProfileCorrupt):
		return parsedProfile{}, v1.BadRequest(err.Error())
	case err != nil && ctx.Err() != nil:
		return parsedProfile{}, v1.Timeout("profile_ref " + r.ProfileRef + ": the request's deadline passed while the profile was read: " + err.Error())
	case err != nil:
		return parsedProfile{}, v1.Unavailable(err.Error())
	}
	pp, err := parseProfile(h.profiles, sum, raw)
	if err != nil {
		return parsedProfile{}, v1.BadRequest("profile_ref " + r.ProfileRef + ": " + err.Error())
	}
	return pp, nil
}

// request turns the wire request into admission's, with its parsed profile.
func (h *handler) request(ctx context.Context, r *v1.AdmitRequest) (admission.Request, error) {
	pp, err := h.profile(ctx, r)
	if err != nil {
		return admission.Request{}, err
	}
	var tokenHash [32]byte // admission requires one for an admit
	if r.TokenSHA256 != "" {
		tokenHash, _ = v1.ParseTokenSHA256(r.TokenSHA256) // well formed: CheckShape
	}
	return admission.Request{RequestID: r.RequestID, TokenHash: tokenHash, JobID: r.Job.ID, Owner: r.Job.Owner, Tenant: h.s.identity(ctx), Priority: r.Job.Priority, Weight: r.Job.Weight, Profile: pp.p, ProfileKey: pp.key,
		MemoryMiB: r.MemoryMiB, Processes: r.Processes, MinPct: r.Compute.MinPct, MaxPct: r.Compute.MaxPct,
		LeaseSeconds: r.LeaseSeconds, Checkpointable: r.Checkpointable}, nil
}

// sloMetric is the wire's slo_metric: "step" for an engine, else absent.
func sloMetric(p admission.ServicePrediction) string {
	if p.Step {
		return "step"
	}
	return ""
}

// wireDecision turns admission's decision into the wire one.
func (h *handler) wireDecision(d admission.Decision) *v1.Decision {
	out := &v1.Decision{Decision: string(d.Outcome), Reason: v1.Reason{Code: string(d.Code), Message: d.Message}, Sidecar: h.s.id}
	if d.Outcome != admission.Deny {
		out.ActiveThreadPct = d.Pct
	}
	for _, p := range d.Predictions {
		out.Predictions = append(out.Predictions, v1.ServicePrediction{Service: p.Service, RateRPS: p.RateRPS, SLOP99MS: p.SLOP99MS, SoloP99MS: p.SoloP99MS,
			PredictedP99MS: p.PredictedP99MS, PredictedP99UpperMS: p.UpperP99MS, Correction: wireCorrection(p.Correction), SLOMetric: sloMetric(p)})
	}
	if d.Lease != nil {
		l := h.wireLease(*d.Lease)
		if d.Env != nil {
			l.Env = d.Env
		}
		out.Lease = &l
	}
	if j := d.Joint; j != nil {
		out.Joint = &v1.Joint{Prices: v1.JointPrices{SLO: j.Prices.SLO, Memory: j.Prices.Memory, Slots: j.Prices.Slots},
			WeightedThroughput: j.Utility, WeightedThroughputBefore: j.Before}
		for _, s := range j.Shares {
			out.Joint.Jobs = append(out.Joint.Jobs, v1.JointJob{JobID: s.JobID, LeaseID: s.LeaseID, Weight: s.Weight, Pct: s.Pct, WasPct: s.WasPct,
				Throughput: s.Throughput, WasThroughput: s.WasThroughput, Utility: s.Weight * s.Throughput})
		}
	}
	return out
}

func (h *handler) wireLease(l admission.Lease) v1.Lease {
	out := v1.Lease{ID: l.ID, JobID: l.JobID, Owner: l.Owner, ExpiresAt: l.ExpiresAt, ActiveThreadPct: l.Pct,
		PinnedMemLimitMiB: l.MemoryMiB, Env: h.s.adm.Env(l), PIDs: slices.Clone(l.PIDs)}
	var until time.Time
	if out.State, until = l.State(); !until.IsZero() {
		out.Deadline = &until
	}
	if g := l.Instance; g != nil {
		out.PinnedMemLimitMiB = 0 // no MPS limit: the instance's memory is the job's
		out.Instance = &v1.Instance{UUID: g.UUID, Profile: g.Profile, SMs: g.SMs, MemoryMiB: g.MemoryMiB}
	}
	return out
}

// decide runs Decide or Quote inside a span and records the outcome.
func (h *handler) decide(ctx context.Context, name string, r *v1.AdmitRequest, fn func(context.Context, admission.Request) (admission.Decision, error)) (*v1.Decision, error) {
	ctx, span := h.s.tel.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("colocd.job", r.Job.ID), // never the request_id: it names the request to its sender only
		attribute.String("colocd.gpu", h.s.gpuInfo.UUID), attribute.String("colocd.sidecar", h.s.id)))
	defer span.End()
	start := time.Now()
	req, err := h.request(ctx, r)
	var d admission.Decision
	if err == nil {
		d, err = fn(ctx, req)
	}
	h.s.tel.metrics.decisionS.Record(ctx, since(start))
	if d.Outcome != "" {
		span.SetAttributes(attribute.String("colocd.decision", string(d.Outcome)), attribute.String("colocd.reason", string(d.Code)),
			attribute.Int("colocd.pct", d.Pct))
		worst := math.Inf(-1)
		for _, p := range d.Predictions {
			h.s.tel.metrics.predictedP99.Record(ctx, p.PredictedP99MS/1000, metricAttrs("service", p.Service))
			if p.PredictedP99MS-p.SLOP99MS > worst {
				worst = p.PredictedP99MS - p.SLOP99MS
				span.SetAttributes(attribute.String("colocd.service", p.Service), attribute.Float64("colocd.predicted_p99_ms", p.PredictedP99MS),
					attribute.Float64("colocd.predicted_p99_upper_ms", p.UpperP99MS), attribute.Float64("colocd.slo_p99_ms", p.SLOP99MS))
			}
		}
		if name == spanAdmit {
			h.s.tel.metrics.decisions.Add(ctx, 1, metricAttrs("outcome", string(d.Outcome), "code", string(d.Code)))
		}
	}
	if name == spanAdmit {
		code := 0
		if err != nil {
			code = v1.CodeOf(busError(err))
		}
		h.s.serving.admitted(code, err, time.Now())
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, busError(err)
	}
	if name == spanAdmit { // a quote changes nothing
		h.s.afterLeaseChange()
	}
	out := h.wireDecision(d)
	h.s.grantUser(ctx, out.Lease)
	return out, nil
}

// Span names of the decision calls.
const (
	spanAdmit = "colocd.admit"
	spanQuote = "colocd.quote"
)

func (h *handler) Admit(ctx context.Context, r *v1.AdmitRequest) (*v1.Decision, error) {
	return h.decide(ctx, spanAdmit, r, h.s.adm.Decide)
}

func (h *handler) Quote(ctx context.Context, r *v1.AdmitRequest) (*v1.Decision, error) {
	return h.decide(ctx, spanQuote, r, h.s.adm.Quote)
}

// leaseCall traces a lease operation.
func (h *handler) leaseCall(ctx context.Context, name, leaseID string, fn func(context.Context) error) error {
	ctx, span := h.s.tel.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("colocd.lease", leaseID), attribute.String("colocd.sidecar", h.s.id)))
	defer span.End()
	if err := fn(ctx); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return busError(err)
	}
	h.s.afterLeaseChange()
	return nil
}

func (h *handler) Renew(ctx context.Context, ref *v1.LeaseRef) (*v1.Lease, error) {
	var out v1.Lease
	err := h.leaseCall(ctx, "colocd.renew", ref.LeaseID, func(ctx context.Context) error {
		l, err := h.s.adm.Renew(ctx, ref.LeaseID, ref.Token)
		out = h.wireLease(l)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func (h *handler) Release(ctx context.Context, ref *v1.LeaseRef) error {
	return h.leaseCall(ctx, "colocd.release", ref.LeaseID, func(ctx context.Context) error {
		return h.s.adm.Release(ctx, ref.LeaseID, ref.Token)
	})
}

func (h *handler) Register(ctx context.Context, r *v1.RegisterRequest) error {
	return h.leaseCall(ctx, "colocd.register", r.LeaseID, func(ctx context.Context) error {
		return h.s.adm.Register(ctx, r.LeaseID, r.Token, r.PIDs)
	})
}

// HasProfile reports whether the profile store holds ref (and it is not due
// to be written again).
func (h *handler) HasProfile(ctx context.Context, ref string) (bool, error) {
	if h.s.profs == nil {
		return false, v1.Unavailable("profile upload: the sidecar has no profile store")
	}
	ok, err := h.s.profs.Has(ctx, ref)
	if err != nil {
		return false, v1.Unavailable(err.Error())
	}
	return ok, nil
}

// PutProfile stores an uploaded profile after checking it is one: a
// launcher's upload can add a valid, bounded profile and nothing else. The
// parsed profile is kept, as for an admit that sent it.
func (h *handler) PutProfile(ctx context.Context, raw []byte) (string, error) {
	if h.s.profs == nil {
		return "", v1.Unavailable("profile upload: the sidecar has no profile store")
	}
	pp, err := parseProfile(h.profiles, sha256.Sum256(raw), raw)
	if err != nil {
		return "", v1.BadRequest("profile upload: " + err.Error())
	}
	if pp.p.Kind != predictor.KindTraining {
		return "", v1.BadRequest(fmt.Sprintf("profile upload: kind: want %q, got %q", predictor.KindTraining, pp.p.Kind))
	}
	ref, err := h.s.profs.Put(ctx, raw)
	if err != nil {
		if ctx.Err() != nil {
			return "", v1.Timeout("profile upload: the request's deadline passed while the profile was stored: " + err.Error())
		}
		return "", v1.Unavailable(err.Error())
	}
	return ref, nil
}

func (h *handler) Status(ctx context.Context) (*v1.Status, error) {
	st, err := h.s.adm.Status(ctx)
	if err != nil {
		return nil, busError(err)
	}
	out := &v1.Status{Sidecar: h.s.id, Mode: string(st.Mode), Health: map[string]string{},
		GPU: v1.GPUStatus{UUID: h.s.gpuInfo.UUID, Name: h.s.gpuInfo.Name, MemoryTotalMiB: int(h.s.gpuInfo.MemoryTotalMiB)}}
	if free, err := (deviceAdapter{h.s.gpu}).FreeMemoryMiB(ctx); err == nil {
		out.GPU.MemoryFreeMiB = free
	}
	failed := h.s.checks.run()
	out.Ready = len(failed) == 0
	for name := range h.s.checks {
		out.Health[name] = "ok"
		if why, bad := failed[name]; bad {
			out.Health[name] = why
		}
	}
	specs := h.s.services()
	faulted, _ := h.s.faults().Fault()
	learned := h.s.adm.Response()
	for _, p := range st.Services {
		ss := v1.ServiceStatus{Name: p.Service, SLOP99MS: p.SLOP99MS, PredictedP99MS: p.PredictedP99MS, PredictedP99UpperMS: p.UpperP99MS, PredictedAtRPS: p.RateRPS,
			Correction: wireCorrection(p.Correction), Guard: "configured", SLOMetric: sloMetric(p)}
		for _, sp := range specs {
			if sp.Name == p.Service {
				ss.RateRPS = sp.RateRPS
			}
		}
		if o, ok := h.s.watched.Observe(p.Service); ok {
			ss.Observed = observedStatus(o)
			if o.Usable() {
				ss.Guard = "observed"
			}
		}
		switch {
		case faulted:
			ss.Guard = "fault"
		case ss.Correction > 1:
			ss.Guard = "corrected"
		}
		ss.Response = wireResponse(learned, p.Service)
		out.Services = append(out.Services, ss)
	}
	caller := h.s.identity(ctx)
	for _, l := range st.Leases {
		wl := h.wireLease(l)
		if caller != "" && l.Tenant != caller {
			wl = otherIdentity(wl)
		}
		out.Leases = append(out.Leases, wl)
	}
	out.ConfigRejected = h.s.configRejected()
	if h.s.daemon != nil {
		out.MPS = wireMPS(h.s.daemon.Health())
	}
	if d, ok := h.s.adm.Draining(); ok {
		out.Draining = &v1.DrainStatus{Since: d.Since, Reason: d.Reason}
	}
	return out, nil
}

// otherIdentity is another identity's lease as a launcher's status shows
// it (docs/security.md#tenant-privacy): its share of the GPU and its
// state, what explains a deny, and not who holds it, its job, its
// environment or its processes.
func otherIdentity(l v1.Lease) v1.Lease {
	return v1.Lease{ExpiresAt: l.ExpiresAt, ActiveThreadPct: l.ActiveThreadPct, PinnedMemLimitMiB: l.PinnedMemLimitMiB,
		Instance: l.Instance, State: l.State, Deadline: l.Deadline}
}

// wireCorrection is a correction as the wire carries it: absent when none.
func wireCorrection(c float64) float64 {
	if c <= 1 {
		return 0
	}
	return c
}

// wireResponse is what the guard learned beside service, for status.
func wireResponse(points []admission.ResponsePoint, service string) []v1.ResponsePoint {
	var out []v1.ResponsePoint
	for _, p := range wireResponsePoints(points) {
		if p.service == service {
			out = append(out, p.ResponsePoint)
		}
	}
	return out
}

// servicePoint is a learned point as status and metrics give it, with its
// service.
type servicePoint struct {
	v1.ResponsePoint
	service string
}

// wireResponsePoints names each point's trainer by its profile's name, or
// the start of its key when it has none.
func wireResponsePoints(points []admission.ResponsePoint) []servicePoint {
	out := make([]servicePoint, len(points))
	for i, p := range points {
		out[i] = servicePoint{v1.ResponsePoint{Trainer: cmp.Or(p.Name, p.Trainer[:min(len(p.Trainer), 12)]), Pct: p.Pct,
			Ratio: p.Ratio, Windows: p.Windows, Last: p.Last}, p.Service}
	}
	return out
}
