package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/fleet"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// flushTimeout bounds Serve's wait for the server to have its subscriptions.
const flushTimeout = 5 * time.Second

// TimeoutHeader carries a request's deadline: the milliseconds the caller
// will wait for the answer, from when it sent the request (Client sets it
// on every request). The context a Handler gets ends that long after the
// request arrived; without the header it has no deadline of its own (the
// sidecar applies admission.decision_timeout to decisions either way).
const TimeoutHeader = "Colocd-Timeout-Ms"

// MaxTimeoutMS bounds TimeoutHeader: one hour.
const MaxTimeoutMS = 3_600_000

// The queue of requests waiting for each endpoint's handler: beyond it
// the server drops them (a slow consumer, logged), so a flood costs the
// sidecar at most this much memory per endpoint.
const (
	EndpointPendingMsgs  = 4096
	EndpointPendingBytes = 8 << 20
	// ProfilePendingBytes is the profile endpoint's: its chunks are up to
	// a message each.
	ProfilePendingBytes = 32 << 20
)

// Handler answers the requests of the NATS API. bus decodes each request
// and passes a context that carries the caller's trace context (the W3C
// traceparent header) as the remote parent and, when the caller sent
// TimeoutHeader, its deadline. Return an *Error to choose the code the
// client sees; any other error is a 500. Admits and quotes run on a pool of
// workers, and lease calls on another (fair.go): the methods must be safe
// for concurrent use.
type Handler interface {
	// Admit decides on a request and, for a grant or throttle, returns the
	// lease with its token.
	Admit(ctx context.Context, req *v1.AdmitRequest) (*v1.Decision, error)
	// Quote decides without granting; any lease in the answer is dropped.
	Quote(ctx context.Context, req *v1.AdmitRequest) (*v1.Decision, error)
	// Renew extends a lease.
	Renew(ctx context.Context, ref *v1.LeaseRef) (*v1.Lease, error)
	// Release ends a lease.
	Release(ctx context.Context, ref *v1.LeaseRef) error
	// Register records a lease's client processes.
	Register(ctx context.Context, req *v1.RegisterRequest) error
	// Status reports the sidecar's state; lease tokens are stripped.
	Status(ctx context.Context) (*v1.Status, error)
	// HasProfile reports whether the profile store holds the profile ref
	// names, so that an upload of it can stop at its first chunk.
	HasProfile(ctx context.Context, ref string) (bool, error)
	// PutProfile checks that raw, a whole uploaded profile whose bytes hash
	// to its reference, is a valid profile, and stores it with the
	// sidecar's identity; it returns the reference.
	PutProfile(ctx context.Context, raw []byte) (string, error)
}

// Service is one sidecar's instance of the colocd micro service.
type Service struct {
	id      string
	h       Handler
	nc      *nats.Conn
	svc     micro.Service
	uploads *ProfileUploads
	// fleetAPI is the JetStream API prefix of the fleet's bucket ("": this
	// server's own).
	fleetAPI string
	// eventsDomain is the JetStream domain of the events stream, for
	// launchers on another server ("": none).
	eventsDomain string
	// watches are the consumers watch made, oldest first: past
	// MaxWatchConsumers the oldest goes (its owner, if it still pulls,
	// asks again from its next sequence and misses nothing).
	watchMu sync.Mutex
	watches []watchRecord
	// limits bound each tenant's share (fair.go): its request rate per
	// class of endpoints, and its places in the decide and lease queues.
	limits          Limits
	decideQ, leaseQ *fairQueue
	rates           [numClasses]*rateLimiter
	log             *slog.Logger
	onFlood         func(tenant, requestInfo string)
}

// class is which queue, workers and rate an endpoint's requests share.
type class int

const (
	// classDecide: admit and quote, which predict.
	classDecide class = iota
	// classLease: renew, release, register, status, quick and frequent.
	classLease
	// classOther: watch, profile and fleet, answered on the endpoint's
	// own goroutine.
	classOther
	numClasses
)

// WithLimits sets the per-tenant limits (zero fields: DefaultLimits).
func WithLimits(l Limits) ServeOption {
	return func(s *Service) { s.limits = l }
}

// WithFloodHandler calls fn, on its own goroutine, when a tenant's
// refusals pass FloodFactor times its burst within a second: a sender
// that does not read its answers. requestInfo is the flooding request's
// RequestInfoHeader (RequestConn reads its connection from it), so that a
// sidecar that runs the server can close that connection.
func WithFloodHandler(fn func(tenant, requestInfo string)) ServeOption {
	return func(s *Service) { s.onFlood = fn }
}

// WithLogger logs refused requests (rate, queue) at debug level and what
// the workers cannot answer at warn.
func WithLogger(l *slog.Logger) ServeOption {
	return func(s *Service) {
		if l != nil {
			s.log = l
		}
	}
}

// ServeOption changes how Serve serves.
type ServeOption func(*Service)

// WithFleetDomain reads the fleet's capacity summaries (colocd.v1.fleet)
// from JetStream domain domain, the hub's when the sidecar's server is a
// leaf node; "" is the server's own JetStream.
func WithFleetDomain(domain string) ServeOption {
	return func(s *Service) {
		if domain != "" {
			s.fleetAPI = DomainAPIPrefix(domain)
		}
	}
}

// DomainAPIPrefix is the JetStream API prefix of domain domain.
func DomainAPIPrefix(domain string) string { return "$JS." + domain + ".API" }

// Serve registers the micro service "colocd" (version must be SemVer) on nc
// with the endpoints colocd.v1.<id>.{admit,renew,release,register,status,
// profile}, served by this sidecar only, and colocd.v1.quote, answered by every
// sidecar (no queue group). The service's metadata carries the sidecar id.
// When nc is connected, the endpoints are reachable once Serve returns.
// Set nc's own handlers before calling Serve: micro chains them.
func Serve(nc *nats.Conn, id, version string, h Handler, opts ...ServeOption) (*Service, error) {
	if nc == nil || h == nil {
		return nil, errors.New("serve: nil connection or handler")
	}
	if err := v1.ValidateSidecarID(id); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        v1.ServiceName,
		Version:     version,
		Description: "colocd admission sidecar: co-locates training with GPU inference",
		Metadata:    map[string]string{"sidecar": id, "api": "v1"},
	})
	if err != nil {
		return nil, fmt.Errorf("serve: add service: %w", err)
	}
	s := &Service{id: id, h: h, nc: nc, svc: svc, uploads: NewProfileUploads(nil), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	s.limits = s.limits.withDefaults()
	for c := range s.rates {
		s.rates[c] = newRateLimiter(s.limits.TenantRate, s.limits.TenantBurst)
	}
	s.decideQ = newFairQueue(s.limits.DecideWorkers, s.limits.DecideQueue, s.limits.TenantDecideQueue)
	s.leaseQ = newFairQueue(s.limits.LeaseWorkers, s.limits.LeaseQueue, s.limits.TenantLeaseQueue)
	endpoints := []struct {
		name, subject string
		fn            func(context.Context, micro.Request) (any, error)
		class         class
		opts          []micro.EndpointOpt
	}{
		{v1.EndpointAdmit, v1.EndpointSubject(id, v1.EndpointAdmit), body(s.admit), classDecide, nil},
		{v1.EndpointRenew, v1.EndpointSubject(id, v1.EndpointRenew), body(s.renew), classLease, nil},
		{v1.EndpointRelease, v1.EndpointSubject(id, v1.EndpointRelease), acknowledge(v1.DecodeLeaseRef, h.Release), classLease, nil},
		{v1.EndpointRegister, v1.EndpointSubject(id, v1.EndpointRegister), acknowledge(v1.DecodeRegisterRequest, h.Register), classLease, nil},
		{v1.EndpointStatus, v1.EndpointSubject(id, v1.EndpointStatus), body(s.status), classLease, nil},
		{v1.EndpointProfile, v1.EndpointSubject(id, v1.EndpointProfile), s.profile, classOther, nil},
		{v1.EndpointQuote, v1.QuoteSubject, body(s.quote), classDecide, []micro.EndpointOpt{micro.WithEndpointQueueGroupDisabled()}},
		{v1.EndpointQuoteOne, v1.EndpointSubject(id, v1.QuoteOneToken), body(s.quote), classDecide, nil},
		{v1.EndpointFleet, v1.FleetSubject, s.fleet, classOther, nil}, // one sidecar of the queue group answers
		{v1.EndpointWatch, v1.EndpointSubject(id, v1.EndpointWatch), s.watch, classOther, nil},
	}
	for _, ep := range endpoints {
		// A flood waits in a bounded queue per endpoint: past it the
		// server drops requests (their senders time out) instead of the
		// sidecar's memory growing with them.
		msgs, bytes := EndpointPendingMsgs, EndpointPendingBytes
		if ep.name == v1.EndpointProfile {
			bytes = ProfilePendingBytes
		}
		opts := append([]micro.EndpointOpt{micro.WithEndpointSubject(ep.subject), micro.WithEndpointPendingLimits(msgs, bytes)}, ep.opts...)
		if err := svc.AddEndpoint(ep.name, s.handle(ep.name, ep.class, ep.fn), opts...); err != nil {
			s.closeQueues()
			return nil, errors.Join(fmt.Errorf("serve: add endpoint %s: %w", ep.name, err), svc.Stop())
		}
	}
	// Make the subscriptions reach the server before returning, so that a
	// request sent right after Serve finds the service. A disconnected
	// connection sends them when it reconnects.
	if nc.IsConnected() {
		_ = nc.FlushTimeout(flushTimeout)
	}
	return s, nil
}

// ID returns the sidecar id the service answers for.
func (s *Service) ID() string { return s.id }

// Info returns micro's description of the service, as $SRV.INFO answers.
func (s *Service) Info() micro.Info { return s.svc.Info() }

// Stop unsubscribes every endpoint, answers the requests still queued for
// a worker with a 503 (nothing was done: ask again), and waits for those
// a worker runs.
func (s *Service) Stop() error {
	err := s.svc.Stop()
	s.closeQueues()
	if err != nil {
		return fmt.Errorf("stop service: %w", err)
	}
	return nil
}

// closeQueues lets the workers answer what is queued, and stops them.
func (s *Service) closeQueues() {
	s.decideQ.close()
	s.leaseQ.close()
}

// handle adapts a decode-and-call function to micro. On the endpoint's
// goroutine it only sorts the request (fair.go): a reply subject that is
// not an inbox is dropped, a tenant past its rate gets a 429 (once a
// second; the rest of its excess is dropped unanswered), the deadline
// starts (the caller's TimeoutHeader counts from here, not from when a
// worker takes the request), and a decision or lease call goes to its
// tenant's queue, or gets a 503 when that is full. The call itself extracts
// the trace context, answers JSON, or puts the error into micro's error
// headers.
func (s *Service) handle(name string, cl class, fn func(context.Context, micro.Request) (any, error)) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		if !inboxReply(req.Reply()) {
			return // an answer there could be a JetStream API call in the sidecar's name: dropped unanswered
		}
		h := nats.Header(req.Headers())
		tenant := Tenant(h)
		if v := s.rates[cl].allow(tenant, time.Now()); !v.ok {
			if v.flood && s.onFlood != nil {
				go s.onFlood(tenant, h.Get(RequestInfoHeader))
			}
			if !v.tell {
				return
			}
			wait := v.wait
			s.log.Warn("requests refused: a launcher is past its rate; until it slows down, one refusal a second is answered and the rest dropped", "endpoint", name, "tenant", tenant)
			s.refuse(req, v1.TooManyRequests(fmt.Sprintf("%s: this launcher (%s) sent more than %g requests a second (nats.limits.tenant_rate); retry after %s",
				name, clipTenant(tenant), s.limits.TenantRate, wait.Round(time.Millisecond))), wait)
			return
		}
		ctx := context.WithValue(extractTrace(context.Background(), h), tenantKey{}, tenant)
		timeout, err := requestTimeout(h)
		if err != nil {
			s.respond(req, nil, err)
			return
		}
		cancel := context.CancelFunc(func() {})
		if timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, timeout)
		}
		call := func() {
			defer cancel()
			if ctx.Err() != nil {
				s.respond(req, nil, v1.Timeout(fmt.Sprintf("%s: the request's deadline passed while it waited for a worker; nothing was done", name)))
				return
			}
			out, err := fn(ctx, req)
			s.respond(req, out, err)
		}
		var q *fairQueue
		switch cl {
		case classDecide:
			q = s.decideQ
		case classLease:
			q = s.leaseQ
		default:
			call()
			return
		}
		stopping := func() {
			cancel()
			s.refuse(req, v1.Unavailable(fmt.Sprintf("%s: the sidecar is stopping; nothing was done: ask again", name)), time.Second)
		}
		if waiting, err := q.push(tenant, job{run: call, refuse: stopping}); errors.Is(err, errQueueClosed) {
			stopping()
		} else if err != nil {
			cancel()
			s.log.Debug("request refused: its queue is full", "endpoint", name, "tenant", tenant, "waiting", waiting)
			s.refuse(req, v1.Unavailable(fmt.Sprintf("%s: %s (%d requests waiting; this launcher may have at most its share of nats.limits' queues); retry after a second",
				name, err, waiting)), time.Second)
		}
	})
}

// respond answers req with out as JSON, or with err in micro's error
// headers.
func (s *Service) respond(req micro.Request, out any, err error) {
	if err == nil {
		var body []byte
		if body, err = json.Marshal(out); err == nil {
			s.answer(req, &nats.Msg{Data: body})
			return
		}
		err = fmt.Errorf("encode response: %w", err)
	}
	s.answer(req, errorMsg(err))
}

// refuse answers req with err and a Retry-After of wait (at least a
// second).
func (s *Service) refuse(req micro.Request, err error, wait time.Duration) {
	m := errorMsg(err)
	m.Header.Set(RetryAfterHeader, strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	s.answer(req, m)
}

// errorMsg is err in micro's error headers.
func errorMsg(err error) *nats.Msg {
	code, desc := v1.WireError(err)
	return &nats.Msg{Header: nats.Header{micro.ErrorHeader: {desc}, micro.ErrorCodeHeader: {code}}}
}

// answer publishes m to req's reply subject on the service's connection.
// Not req.Respond or req.Error: they record their outcome in the request
// for micro's handler to read when the endpoint's handler returns, and an
// answer from a queue's worker comes after that, so the two would race.
// micro's statistics therefore count no error of these endpoints. A failed
// publish leaves the caller to its timeout.
func (s *Service) answer(req micro.Request, m *nats.Msg) {
	m.Subject = req.Reply()
	_ = s.nc.PublishMsg(m)
}

// clipTenant shortens a tenant's name for a message.
func clipTenant(t string) string {
	if len(t) > 64 {
		return t[:64] + "…"
	}
	return t
}

// body adapts an endpoint that reads only the request's body.
func body(fn func(context.Context, []byte) (any, error)) func(context.Context, micro.Request) (any, error) {
	return func(ctx context.Context, req micro.Request) (any, error) { return fn(ctx, req.Data()) }
}

// requestTimeout reads TimeoutHeader: 0 when absent, a 400 naming the
// header when it is not a whole number of milliseconds in [1, MaxTimeoutMS].
func requestTimeout(h nats.Header) (time.Duration, error) {
	v := h.Get(TimeoutHeader)
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || ms < 1 || ms > MaxTimeoutMS {
		if len(v) > 32 {
			v = v[:32] + "…"
		}
		return 0, v1.BadRequest(fmt.Sprintf("header %s: want the milliseconds the caller waits, in [1, %d], got %q", TimeoutHeader, MaxTimeoutMS, v))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

var emptyObject = json.RawMessage("{}")

func (s *Service) admit(ctx context.Context, data []byte) (any, error) {
	return s.decide(ctx, data, "admit", s.h.Admit)
}

func (s *Service) quote(ctx context.Context, data []byte) (any, error) {
	d, err := s.decide(ctx, data, "quote", s.h.Quote)
	if err != nil {
		return nil, err
	}
	d.Lease = nil
	return d, nil
}

// decide hands an admit or a quote to fn and stamps a copy of its decision
// with the sidecar's id.
func (s *Service) decide(ctx context.Context, data []byte, what string, fn func(context.Context, *v1.AdmitRequest) (*v1.Decision, error)) (*v1.Decision, error) {
	req, err := v1.DecodeAdmitRequest(data)
	if err != nil {
		return nil, err
	}
	d, err := fn(ctx, req)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New(what + ": handler returned no decision")
	}
	out := *d
	out.Sidecar = s.id
	return &out, nil
}

func (s *Service) renew(ctx context.Context, data []byte) (any, error) {
	ref, err := v1.DecodeLeaseRef(data)
	if err != nil {
		return nil, err
	}
	l, err := s.h.Renew(ctx, ref)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, errors.New("renew: handler returned no lease")
	}
	return l, nil
}

// acknowledge adapts a handler call that returns nothing but an error
// (release, register): its endpoint answers an empty object.
func acknowledge[R any](decode func([]byte) (R, error), fn func(context.Context, R) error) func(context.Context, micro.Request) (any, error) {
	return func(ctx context.Context, req micro.Request) (any, error) {
		r, err := decode(req.Data())
		if err != nil {
			return nil, err
		}
		if err := fn(ctx, r); err != nil {
			return nil, err
		}
		return emptyObject, nil
	}
}

func (s *Service) status(ctx context.Context, data []byte) (any, error) {
	if err := v1.DecodeEmpty("status request", data); err != nil {
		return nil, err
	}
	st, err := s.h.Status(ctx)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, errors.New("status: handler returned no status")
	}
	out := *st
	out.Sidecar = s.id
	out.Leases = make([]v1.Lease, len(st.Leases))
	for i, l := range st.Leases {
		l.Token = ""
		out.Leases[i] = l
	}
	return &out, nil
}

// profile takes one chunk of a profile upload (upload.go). Its first chunk
// ends the upload at once when the sidecar already holds the profile; the
// last one has the handler check and store the whole profile.
func (s *Service) profile(ctx context.Context, req micro.Request) (any, error) {
	c, err := ParseProfileChunk(req.Headers(), req.Data())
	if err != nil {
		return nil, err
	}
	c.Tenant = tenantOf(ctx)
	if c.Offset == 0 {
		if ok, err := s.h.HasProfile(ctx, c.Ref); err != nil {
			return nil, err
		} else if ok {
			s.uploads.Forget(c.Tenant, c.Ref)
			return &ProfileUpload{Received: c.Size, ProfileRef: c.Ref}, nil
		}
	}
	n, raw, err := s.uploads.Add(c)
	if err != nil || raw == nil {
		return &ProfileUpload{Received: n}, err
	}
	ref, err := s.h.PutProfile(ctx, raw)
	if err != nil {
		return nil, err
	}
	return &ProfileUpload{Received: n, ProfileRef: ref}, nil
}

// inboxReply reports whether reply is a requester's inbox: a launcher's
// (_INBOX.), a sidecar's own (_COLOCD_INBOX.), or the reply the server made
// for a request from another account (_R_., which no client may name). A
// request with any other reply subject is not answered: the answer would be
// published with the sidecar's identity, which may use the JetStream API,
// so a reply of $JS.API.STREAM.PURGE.<bucket> would purge it.
func inboxReply(reply string) bool {
	return strings.HasPrefix(reply, v1.LauncherInboxPrefix+".") || strings.HasPrefix(reply, v1.SidecarInboxRoot+".") ||
		strings.HasPrefix(reply, serviceReplyPrefix)
}

// serviceReplyPrefix starts the replies nats-server makes for requests that
// cross an account boundary; it refuses them from clients.
const serviceReplyPrefix = "_R_."

// fleetRetryWait is the pause before the fleet's summaries are read again
// after no responders, and fleetTries how many reads a request makes.
const (
	fleetRetryWait = 100 * time.Millisecond
	fleetTries     = 3
)

// MaxFleetReply bounds the summaries one fleet answer carries, below NATS's
// default 1 MiB message.
const MaxFleetReply = 900 << 10

// fleet answers colocd.v1.fleet: every live capacity summary, read with
// the sidecar's identity (a launcher may not use the JetStream API), as a
// JSON array; a fleet whose summaries do not fit in one message is a 503
// naming the limit.
func (s *Service) fleet(ctx context.Context, _ micro.Request) (any, error) {
	// Bounded by the sidecar, not only by the caller: across a leaf
	// connection a bucket that is not there yet is silence, not an error.
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	caps, _, err := fleet.ReadCapacities(ctx, s.nc, s.fleetAPI)
	// Just after a cluster node goes, the bucket's direct-get responders
	// may be gone a moment: no responders is asked again, a few times (a
	// bucket that is not there, or a leaf link that is down, stays a quick
	// 503).
	for try := 1; errors.Is(err, nats.ErrNoResponders) && try < fleetTries && ctx.Err() == nil; try++ {
		select {
		case <-ctx.Done():
		case <-time.After(fleetRetryWait):
			caps, _, err = fleet.ReadCapacities(ctx, s.nc, s.fleetAPI)
		}
	}
	if err != nil {
		return nil, v1.Unavailable(fmt.Sprintf("fleet: reading the capacity summaries failed: %v", err))
	}
	data, err := json.Marshal(caps)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFleetReply {
		return nil, v1.Unavailable(fmt.Sprintf("fleet: %d summaries are %d bytes, more than one answer carries (%d)", len(caps), len(data), MaxFleetReply))
	}
	return json.RawMessage(data), nil
}
