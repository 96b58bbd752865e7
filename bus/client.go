package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/fleet"

	"github.com/colocd/colocd/internal/termtext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// DefaultTimeout bounds a client request whose context has no deadline.
const DefaultTimeout = 5 * time.Second

// Client is the launcher's side of the NATS API. It is safe for concurrent
// use. Every request carries the current span's W3C trace context.
type Client struct {
	nc      *nats.Conn
	timeout time.Duration

	profilesMu sync.Mutex
	profiles   *ProfileStore // opened by the first PutProfile that succeeds
}

// A Client is what fleet.Place asks the fleet through.
var _ fleet.Quoter = (*Client)(nil)

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithTimeout sets the bound on requests whose context has no deadline
// (default DefaultTimeout).
func WithTimeout(d time.Duration) ClientOption {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// NewClient returns a client that talks over nc.
func NewClient(nc *nats.Conn, opts ...ClientOption) *Client {
	c := &Client{nc: nc, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Admit asks sidecar sidecarID for a slot. A deny is a Decision, not an
// error. When req has no RequestID or TokenSHA256, Admit draws them (and
// keeps them in req, so that a retry with the same req is the same
// request); a granted lease then carries the drawn token in Lease.Token.
// Errors: *Error for an error answer, ErrNoSidecar when no sidecar with
// that id listens.
func (c *Client) Admit(ctx context.Context, sidecarID string, req *v1.AdmitRequest) (*v1.Decision, error) {
	req.Prepare()
	var d v1.Decision
	if err := c.call(ctx, sidecarID, v1.EndpointAdmit, req, &d); err != nil {
		return nil, err
	}
	if d.Lease != nil && req.Token() != "" && v1.TokenSHA256(req.Token()) == req.TokenSHA256 {
		d.Lease.Token = req.Token()
	}
	return &d, nil
}

// PutProfile stores a training profile's bytes in the ProfileBucket object
// store (once: a put of stored bytes only checks) and returns the reference
// to send as AdmitRequest.ProfileRef. The bucket is created if need be.
func (c *Client) PutProfile(ctx context.Context, raw []byte) (string, error) {
	ctx, cancel := c.Bound(ctx)
	defer cancel()
	c.profilesMu.Lock()
	if c.profiles == nil {
		js, err := jetstream.New(c.nc)
		if err == nil {
			c.profiles, err = OpenProfileStore(ctx, js, 1)
		}
		if err != nil {
			c.profilesMu.Unlock()
			return "", fmt.Errorf("put profile: %w", err)
		}
	}
	st := c.profiles
	c.profilesMu.Unlock()
	return st.Put(ctx, raw)
}

// UploadProfile adds a training profile's bytes to the profile store
// through a sidecar, which checks that they are a valid profile and stores
// them with its own identity, and returns the reference to send as
// AdmitRequest.ProfileRef. It is the way to send a large profile by
// reference for a launcher that may not write the store (the embedded
// server's launchers). The bytes go in chunks that fit in a message; an
// upload of a profile the sidecar already holds ends after the first.
func (c *Client) UploadProfile(ctx context.Context, sidecarID string, raw []byte) (string, error) {
	if err := v1.ValidateSidecarID(sidecarID); err != nil {
		return "", fmt.Errorf("upload profile: %w", err)
	}
	if len(raw) == 0 || uint64(len(raw)) > maxProfileBytes {
		return "", fmt.Errorf("upload profile: %d bytes: want 1 to %d: %w", len(raw), maxProfileBytes, ErrProfileTooLarge)
	}
	ctx, cancel := c.Bound(ctx)
	defer cancel()
	ref, size := v1.ProfileRef(raw), strconv.Itoa(len(raw))
	// Room for the headers and the reply subject in each message.
	chunk := ProfileChunkBytes
	if mp := int(c.nc.MaxPayload()); mp > 0 && chunk > mp-4096 {
		chunk = max(mp-4096, 1024)
	}
	for off := 0; ; {
		msg := c.rawMsg(ctx, v1.EndpointSubject(sidecarID, v1.EndpointProfile), raw[off:min(off+chunk, len(raw))])
		msg.Header.Set(HeaderProfileRef, ref)
		msg.Header.Set(HeaderProfileSize, size)
		msg.Header.Set(HeaderProfileOffset, strconv.Itoa(off))
		var up ProfileUpload
		if err := c.roundTrip(ctx, sidecarID, v1.EndpointProfile, msg, &up); err != nil {
			return "", fmt.Errorf("upload profile %s at offset %d: %w", ref, off, err)
		}
		switch {
		case up.ProfileRef == ref:
			return ref, nil
		case up.ProfileRef != "":
			return "", fmt.Errorf("upload profile %s: the sidecar stored it as %q", ref, termtext.Clip(up.ProfileRef))
		case up.Received <= off || up.Received >= len(raw):
			return "", fmt.Errorf("upload profile %s: the sidecar holds %d bytes after a chunk at offset %d of %d", ref, up.Received, off, len(raw))
		}
		off = up.Received
	}
}

// Renew extends a lease and returns it with its new expiry.
func (c *Client) Renew(ctx context.Context, sidecarID string, ref *v1.LeaseRef) (*v1.Lease, error) {
	var l v1.Lease
	if err := c.call(ctx, sidecarID, v1.EndpointRenew, ref, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Release ends a lease.
func (c *Client) Release(ctx context.Context, sidecarID string, ref *v1.LeaseRef) error {
	return c.call(ctx, sidecarID, v1.EndpointRelease, ref, nil)
}

// Register tells the sidecar the lease's client process ids.
func (c *Client) Register(ctx context.Context, sidecarID string, req *v1.RegisterRequest) error {
	return c.call(ctx, sidecarID, v1.EndpointRegister, req, nil)
}

// Status returns a sidecar's state.
func (c *Client) Status(ctx context.Context, sidecarID string) (*v1.Status, error) {
	var st v1.Status
	if err := c.call(ctx, sidecarID, v1.EndpointStatus, struct{}{}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// call sends one request to a sidecar endpoint and decodes the answer into
// out (nil: the answer is ignored).
func (c *Client) call(ctx context.Context, sidecarID, endpoint string, in, out any) error {
	if err := v1.ValidateSidecarID(sidecarID); err != nil {
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	ctx, cancel := c.Bound(ctx)
	defer cancel()
	msg, err := c.newMsg(ctx, v1.EndpointSubject(sidecarID, endpoint), in)
	if err != nil {
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	return c.roundTrip(ctx, sidecarID, endpoint, msg, out)
}

// roundTrip sends msg to a sidecar's endpoint and decodes the answer into
// out (nil: the answer is ignored).
func (c *Client) roundTrip(ctx context.Context, sidecarID, endpoint string, msg *nats.Msg, out any) error {
	resp, resent, err := c.requestAcrossReconnects(ctx, msg)
	if resent && endpoint == v1.EndpointRelease && v1.CodeOf(errOf(resp)) == v1.CodeNotFound {
		return nil // the first send released it before its server went away
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%s on sidecar %s: %w", endpoint, sidecarID, v1.ErrNoSidecar)
	}
	if sentUnanswered(err) {
		return fmt.Errorf("%s on sidecar %s: %w: %w", endpoint, sidecarID, v1.ErrNoAnswer, err)
	}
	if err != nil {
		return fmt.Errorf("%s on sidecar %s: %w", endpoint, sidecarID, err)
	}
	if e := responseError(resp); e != nil {
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Data, out); err != nil {
		return fmt.Errorf("%s on sidecar %s: decode answer: %w", endpoint, sidecarID, err)
	}
	return nil
}

// errOf is the *Error an answer carries, as an error (nil for none).
func errOf(m *nats.Msg) error {
	if m == nil {
		return nil
	}
	if e := responseError(m); e != nil {
		return e
	}
	return nil
}

// reconnectPoll is how often a request waiting for its answer looks
// whether the connection came back from a disconnect meanwhile.
const reconnectPoll = 50 * time.Millisecond

// requestAcrossReconnects sends msg and waits for its answer until ctx
// ends. A request that went out before the connection dropped may have
// been lost with its server: when the connection has reconnected while
// the request waits, it is sent again at once (resent), not after the
// caller's timeout and backoff. Every request of the API may be sent
// twice: an admit with the same request_id and token gets the same
// decision, renew and register are idempotent, and a second release
// finds the lease gone (roundTrip takes that as done). A resent request
// that finds no responders within resubscribeGrace of the reconnect is
// asked again: the sidecar's connection may come back after the caller's.
func (c *Client) requestAcrossReconnects(ctx context.Context, msg *nats.Msg) (resp *nats.Msg, resent bool, err error) {
	var back time.Time // when the connection came back, for a resent request
	for {
		reconnects := c.nc.Stats().Reconnects
		actx, cancel := context.WithCancel(ctx)
		type answer struct {
			m   *nats.Msg
			err error
		}
		done := make(chan answer, 1)
		go func() {
			m, err := c.nc.RequestMsgWithContext(actx, msg)
			done <- answer{m, err}
		}()
		tick := time.NewTicker(reconnectPoll)
		again := false
		var a answer
	wait:
		for {
			select {
			case a = <-done:
				break wait
			case <-tick.C:
				if c.nc.Stats().Reconnects != reconnects && c.nc.IsConnected() {
					cancel()
					a = <-done
					again = a.err != nil && ctx.Err() == nil
					break wait
				}
			}
		}
		tick.Stop()
		cancel()
		if !again && resent && errors.Is(a.err, nats.ErrNoResponders) && time.Since(back) < resubscribeGrace {
			// Back before the sidecar's own connection: its subscriptions
			// return with it in a moment.
			select {
			case <-ctx.Done():
				return a.m, resent, a.err
			case <-time.After(reconnectPoll):
			}
			continue
		}
		if !again {
			return a.m, resent, a.err
		}
		resent, back = true, time.Now()
	}
}

// resubscribeGrace is how long after a reconnect a resent request's "no
// responders" is taken for a sidecar not yet back, and asked again.
const resubscribeGrace = 5 * time.Second

// sentUnanswered reports whether a request's error says it may have gone
// out without an answer coming back: a timeout, the caller giving up, or the
// connection closing meanwhile; not a request refused before it was sent
// (too large, a bad subject).
func sentUnanswered(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || errors.Is(err, nats.ErrConnectionClosed)
}

// Bound gives ctx the client's timeout when it has no deadline: the bound
// each of its calls works within, for a caller that shares it out (as
// fleet.Place shares it between the quotes and the admits).
func (c *Client) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

// newMsg builds a request with a JSON body, the trace context headers and,
// when ctx has a deadline, TimeoutHeader: the sidecar stops working on the
// request when the caller stops waiting, and grants nothing after that.
func (c *Client) newMsg(ctx context.Context, subject string, in any) (*nats.Msg, error) {
	data, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return c.rawMsg(ctx, subject, data), nil
}

// rawMsg is newMsg for a body that is already bytes.
func (c *Client) rawMsg(ctx context.Context, subject string, data []byte) *nats.Msg {
	msg := nats.NewMsg(subject)
	msg.Data = data
	injectTrace(ctx, msg.Header)
	if d, ok := ctx.Deadline(); ok {
		ms := min(max(time.Until(d).Milliseconds(), 1), MaxTimeoutMS)
		msg.Header.Set(TimeoutHeader, strconv.FormatInt(ms, 10))
	}
	return msg
}

// responseError returns the *Error carried in micro's error headers, or nil.
func responseError(m *nats.Msg) *v1.Error {
	code := m.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return nil
	}
	e := v1.ParseWireError(code, m.Header.Get(micro.ErrorHeader))
	if secs, err := strconv.Atoi(m.Header.Get(RetryAfterHeader)); err == nil && secs > 0 && secs <= maxRetryAfter {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}

// maxRetryAfter bounds the Retry-After a client takes, in seconds.
const maxRetryAfter = 3600

// isNoResponders reports NATS's "no responders" status message.
func isNoResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}

// Quote asks every sidecar for a decision without a lease (scatter-gather
// on colocd.v1.quote) and collects the answers that arrive until wait
// elapses or ctx ends, in arrival order; each names its sidecar. A sidecar's
// error answer is skipped while others answer. With no answer at all Quote
// returns ErrNoSidecar (immediately when nobody listens), the sidecars'
// errors joined when only errors came, or ctx's error when ctx ended before
// wait. wait <= 0 means until ctx ends, which then needs a deadline.
func (c *Client) Quote(ctx context.Context, req *v1.AdmitRequest, wait time.Duration) ([]*v1.Decision, error) {
	return c.quote(ctx, req, wait, nil)
}

// QuoteExpect is Quote that also stops once every sidecar of expect
// answered (none: only wait or ctx end it); colocd quote expects every
// sidecar with a live summary. An error answer names no sidecar, so it
// counts for none.
func (c *Client) QuoteExpect(ctx context.Context, req *v1.AdmitRequest, wait time.Duration, expect []string) ([]*v1.Decision, error) {
	return c.quote(ctx, req, wait, expect)
}

func (c *Client) quote(ctx context.Context, req *v1.AdmitRequest, wait time.Duration, expect []string) ([]*v1.Decision, error) {
	missing, expected, extras := map[string]bool{}, map[string]bool{}, 0
	for _, id := range expect {
		missing[id], expected[id] = true, true
	}
	parent := ctx
	if wait <= 0 {
		if _, ok := ctx.Deadline(); !ok {
			return nil, errors.New("quote: need a wait or a context deadline")
		}
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	msg, err := c.newMsg(ctx, v1.QuoteSubject, req)
	if err != nil {
		return nil, fmt.Errorf("quote: %w", err)
	}
	msg.Reply = c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(msg.Reply)
	if err != nil {
		return nil, fmt.Errorf("quote: subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.PublishMsg(msg); err != nil {
		return nil, fmt.Errorf("quote: publish: %w", err)
	}
	var (
		decisions []*v1.Decision
		errs      []error
	)
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // wait elapsed or ctx ended
		}
		if isNoResponders(m) {
			break
		}
		var d v1.Decision
		if e := responseError(m); e != nil {
			errs = append(errs, e)
		} else if err := json.Unmarshal(m.Data, &d); err != nil {
			errs = append(errs, fmt.Errorf("quote: decode answer: %w", err))
		} else {
			decisions = append(decisions, &d)
		}
		if len(expect) > 0 {
			if d.Sidecar != "" && !expected[d.Sidecar] {
				extras++ // a sidecar with no live summary
			}
			delete(missing, d.Sidecar)
			// Done when every expected sidecar answered; an error answer
			// names none, so also when the answers from expected
			// sidecars and the errors add up to all of them.
			if len(missing) == 0 || len(decisions)-extras+len(errs) >= len(expect) {
				break
			}
		}
	}
	switch {
	case len(decisions) > 0:
		return decisions, nil
	case len(errs) > 0:
		return nil, fmt.Errorf("quote: %w", errors.Join(errs...))
	case wait > 0 && parent.Err() != nil:
		return nil, fmt.Errorf("quote: %w", parent.Err())
	default:
		return nil, fmt.Errorf("quote: %w", v1.ErrNoSidecar)
	}
}

// Capacities reads every live capacity summary of the fleet through one
// sidecar (colocd.v1.fleet): what a launcher, which may not use the
// JetStream API, ranks GPUs by. Each summary is decoded as untrusted
// (fleet.DecodeCapacity); those that do not decode are returned as errors
// beside the good ones.
func (c *Client) Capacities(ctx context.Context) ([]*fleet.Capacity, []error, error) {
	ctx, cancel := c.Bound(ctx)
	defer cancel()
	var raws []json.RawMessage
	// A read is safe to repeat. The sidecar that took a request can lose
	// its connection before it answers (a cluster node killed), so a try
	// waits a little longer than a sidecar bounds its own read, not the
	// whole deadline.
	for try := 1; ; try++ {
		tctx, tcancel := context.WithTimeout(ctx, fleetTryTimeout)
		msg, err := c.newMsg(tctx, v1.FleetSubject, struct{}{})
		if err != nil {
			tcancel()
			return nil, nil, fmt.Errorf("fleet: %w", err)
		}
		err = c.roundTrip(tctx, "any", v1.EndpointFleet, msg, &raws)
		tcancel()
		if err == nil {
			break
		}
		if !errors.Is(err, v1.ErrNoAnswer) || try == fleetTries || ctx.Err() != nil {
			return nil, nil, err
		}
	}
	var (
		out []*fleet.Capacity
		bad []error
	)
	for _, r := range raws {
		cp, err := fleet.DecodeCapacity("", r)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, cp)
	}
	return out, bad, nil
}

// fleetTryTimeout bounds one try of Capacities: a sidecar bounds its own
// read of the summaries at DefaultTimeout.
const fleetTryTimeout = DefaultTimeout + time.Second

// QuoteOne asks one sidecar for a quote (colocd.v1.<id>.quote): its
// decision, with no lease taken.
func (c *Client) QuoteOne(ctx context.Context, sidecarID string, req *v1.AdmitRequest) (*v1.Decision, error) {
	var d v1.Decision
	if err := c.call(ctx, sidecarID, v1.QuoteOneToken, req, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// QuoteEach asks each of sidecars for a quote (colocd.v1.<id>.quote) at
// once, with req encoded once for all, and returns the answers as they
// come, until all answered or ctx ends (the client's timeout when it has
// no deadline); a sidecar that errs, or answers in another's name, answers
// nothing. It returns once every quote has ended.
func (c *Client) QuoteEach(ctx context.Context, req *v1.AdmitRequest, sidecars []string) []*v1.Decision {
	ctx, cancel := c.Bound(ctx)
	defer cancel()
	data, err := json.Marshal(req)
	if err != nil {
		return nil
	}
	ch := make(chan *v1.Decision, len(sidecars))
	var wg sync.WaitGroup
	for _, id := range sidecars {
		wg.Go(func() {
			var d v1.Decision
			if v1.ValidateSidecarID(id) != nil {
				ch <- nil // no subject to ask it on
				return
			}
			msg := c.rawMsg(ctx, v1.EndpointSubject(id, v1.QuoteOneToken), data)
			if err := c.roundTrip(ctx, id, v1.QuoteOneToken, msg, &d); err != nil || d.Sidecar != id {
				ch <- nil // no answer, or one in another's name
				return
			}
			ch <- &d
		})
	}
	var out []*v1.Decision
	for range sidecars {
		var d *v1.Decision
		select {
		case d = <-ch:
		case <-ctx.Done():
		}
		if ctx.Err() != nil && d == nil {
			break
		}
		if d != nil {
			out = append(out, d)
		}
	}
	cancel()
	wg.Wait()
	return out
}

// MaxPayload is the largest message the connected server takes (1 MiB by
// default; 0 before the first connect).
func (c *Client) MaxPayload() int64 { return c.nc.MaxPayload() }
