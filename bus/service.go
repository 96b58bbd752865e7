package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

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
// client sees; any other error is a 500. micro runs the requests of one
// endpoint one at a time.
type Handler interface {
	// Admit decides on a request and, for a grant or throttle, returns the
	// lease with its token.
	Admit(ctx context.Context, req *AdmitRequest) (*Decision, error)
	// Quote decides without granting; any lease in the answer is dropped.
	Quote(ctx context.Context, req *AdmitRequest) (*Decision, error)
	// Renew extends a lease.
	Renew(ctx context.Context, ref *LeaseRef) (*Lease, error)
	// Release ends a lease.
	Release(ctx context.Context, ref *LeaseRef) error
	// Register records a lease's client processes.
	Register(ctx context.Context, req *RegisterRequest) error
	// Status reports the sidecar's state; lease tokens are stripped.
	Status(ctx context.Context) (*Status, error)
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
	watches []string
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
	if err := ValidateSidecarID(id); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     version,
		Description: "colocd admission sidecar: co-locates training with GPU inference",
		Metadata:    map[string]string{"sidecar": id, "api": "v1"},
	})
	if err != nil {
		return nil, fmt.Errorf("serve: add service: %w", err)
	}
	s := &Service{id: id, h: h, nc: nc, svc: svc, uploads: NewProfileUploads(nil)}
	for _, o := range opts {
		o(s)
	}
	endpoints := []struct {
		name, subject string
		fn            func(context.Context, micro.Request) (any, error)
		opts          []micro.EndpointOpt
	}{
		{EndpointAdmit, EndpointSubject(id, EndpointAdmit), body(s.admit), nil},
		{EndpointRenew, EndpointSubject(id, EndpointRenew), body(s.renew), nil},
		{EndpointRelease, EndpointSubject(id, EndpointRelease), body(s.release), nil},
		{EndpointRegister, EndpointSubject(id, EndpointRegister), body(s.register), nil},
		{EndpointStatus, EndpointSubject(id, EndpointStatus), body(s.status), nil},
		{EndpointProfile, EndpointSubject(id, EndpointProfile), s.profile, nil},
		{EndpointQuote, QuoteSubject, body(s.quote), []micro.EndpointOpt{micro.WithEndpointQueueGroupDisabled()}},
		{EndpointQuoteOne, EndpointSubject(id, quoteOneToken), body(s.quote), nil},
		{EndpointFleet, FleetSubject, s.fleet, nil}, // one sidecar of the queue group answers
		{EndpointWatch, EndpointSubject(id, EndpointWatch), s.watch, nil},
	}
	for _, ep := range endpoints {
		// A flood waits in a bounded queue per endpoint: past it the
		// server drops requests (their senders time out) instead of the
		// sidecar's memory growing with them.
		msgs, bytes := EndpointPendingMsgs, EndpointPendingBytes
		if ep.name == EndpointProfile {
			bytes = ProfilePendingBytes
		}
		opts := append([]micro.EndpointOpt{micro.WithEndpointSubject(ep.subject), micro.WithEndpointPendingLimits(msgs, bytes)}, ep.opts...)
		if err := svc.AddEndpoint(ep.name, handle(ep.fn), opts...); err != nil {
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

// Stop unsubscribes every endpoint (draining what was already received).
// Requests in flight finish; to wait for them, drain the connection.
func (s *Service) Stop() error {
	if err := s.svc.Stop(); err != nil {
		return fmt.Errorf("stop service: %w", err)
	}
	return nil
}

// handle adapts a decode-and-call function to micro: it extracts the trace
// context and the caller's deadline, answers JSON, or puts the error into
// micro's error headers.
func handle(fn func(context.Context, micro.Request) (any, error)) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		if !inboxReply(req.Reply()) {
			return // an answer there could be a JetStream API call in the sidecar's name: dropped unanswered
		}
		h := nats.Header(req.Headers())
		ctx := extractTrace(context.Background(), h)
		timeout, err := requestTimeout(h)
		var out any
		if err == nil {
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			out, err = fn(ctx, req)
		}
		if err == nil {
			var body []byte
			if body, err = json.Marshal(out); err == nil {
				// A failed respond is counted in micro's stats; the caller times out.
				_ = req.Respond(body)
				return
			}
			err = fmt.Errorf("encode response: %w", err)
		}
		code, desc := wireError(err)
		_ = req.Error(code, desc, nil)
	})
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
		return 0, BadRequest(fmt.Sprintf("header %s: want the milliseconds the caller waits, in [1, %d], got %q", TimeoutHeader, MaxTimeoutMS, v))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

var emptyObject = json.RawMessage("{}")

func (s *Service) admit(ctx context.Context, data []byte) (any, error) {
	req, err := DecodeAdmitRequest(data)
	if err != nil {
		return nil, err
	}
	d, err := s.h.Admit(ctx, req)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("admit: handler returned no decision")
	}
	out := *d
	out.Sidecar = s.id
	return &out, nil
}

func (s *Service) quote(ctx context.Context, data []byte) (any, error) {
	req, err := DecodeAdmitRequest(data)
	if err != nil {
		return nil, err
	}
	d, err := s.h.Quote(ctx, req)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("quote: handler returned no decision")
	}
	out := *d
	out.Sidecar = s.id
	out.Lease = nil
	return &out, nil
}

func (s *Service) renew(ctx context.Context, data []byte) (any, error) {
	ref, err := DecodeLeaseRef(data)
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

func (s *Service) release(ctx context.Context, data []byte) (any, error) {
	ref, err := DecodeLeaseRef(data)
	if err != nil {
		return nil, err
	}
	if err := s.h.Release(ctx, ref); err != nil {
		return nil, err
	}
	return emptyObject, nil
}

func (s *Service) register(ctx context.Context, data []byte) (any, error) {
	req, err := DecodeRegisterRequest(data)
	if err != nil {
		return nil, err
	}
	if err := s.h.Register(ctx, req); err != nil {
		return nil, err
	}
	return emptyObject, nil
}

func (s *Service) status(ctx context.Context, data []byte) (any, error) {
	if err := decodeEmpty("status request", data); err != nil {
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
	out.Leases = make([]Lease, len(st.Leases))
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
	if c.Offset == 0 {
		if ok, err := s.h.HasProfile(ctx, c.Ref); err != nil {
			return nil, err
		} else if ok {
			s.uploads.Forget(c.Ref)
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
	return strings.HasPrefix(reply, LauncherInboxPrefix+".") || strings.HasPrefix(reply, sidecarInboxRoot+".") ||
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
	caps, _, err := ReadCapacities(ctx, s.nc, s.fleetAPI)
	// Just after a cluster node goes, the bucket's direct-get responders
	// may be gone a moment: no responders is asked again, a few times (a
	// bucket that is not there, or a leaf link that is down, stays a quick
	// 503).
	for try := 1; errors.Is(err, nats.ErrNoResponders) && try < fleetTries && ctx.Err() == nil; try++ {
		select {
		case <-ctx.Done():
		case <-time.After(fleetRetryWait):
			caps, _, err = ReadCapacities(ctx, s.nc, s.fleetAPI)
		}
	}
	if err != nil {
		return nil, Unavailable(fmt.Sprintf("fleet: reading the capacity summaries failed: %v", err))
	}
	data, err := json.Marshal(caps)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFleetReply {
		return nil, Unavailable(fmt.Sprintf("fleet: %d summaries are %d bytes, more than one answer carries (%d)", len(caps), len(data), MaxFleetReply))
	}
	return json.RawMessage(data), nil
}
