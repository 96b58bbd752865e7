package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/internal/wiretest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestRoundTripEveryEndpoint(t *testing.T) {
	t.Parallel()
	e, h := servedFake(t)
	c := NewClient(connect(t, e))
	ctx := testCtx(t)
	ref := &v1.LeaseRef{LeaseID: "l-1", Token: "secret"}

	t.Run("admit", func(t *testing.T) {
		sent := wiretest.AdmitRequest()
		got, err := c.Admit(ctx, "gpu-a", sent)
		if err != nil {
			t.Fatal(err)
		}
		// The client drew a token, sent only its hash, and hands the
		// token to its caller beside the lease.
		if sent.Token() == "" || sent.TokenSHA256 != v1.TokenSHA256(sent.Token()) || got.Lease.Token != sent.Token() {
			t.Fatalf("token %q, hash %q, lease token %q", sent.Token(), sent.TokenSHA256, got.Lease.Token)
		}
		want := wiretest.Decision()
		want.Sidecar = "gpu-a" // the service names itself
		want.Lease.Token = sent.Token()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("decision (-want +got):\n%s", diff)
		}
		h.wantLast(t, "admit", sent, cmpopts.IgnoreUnexported(v1.AdmitRequest{}))
		if r, _ := h.last("admit"); r.(*v1.AdmitRequest).Token() != "" {
			t.Error("the lease token reached the sidecar: it is never on the wire")
		}
	})
	t.Run("renew", func(t *testing.T) {
		got, err := c.Renew(ctx, "gpu-a", ref)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wiretest.Lease(), got); diff != "" {
			t.Errorf("lease (-want +got):\n%s", diff)
		}
		h.wantLast(t, "renew", ref)
	})
	t.Run("release", func(t *testing.T) {
		if err := c.Release(ctx, "gpu-a", ref); err != nil {
			t.Fatal(err)
		}
		h.wantLast(t, "release", ref)
	})
	t.Run("register", func(t *testing.T) {
		reg := &v1.RegisterRequest{LeaseID: "l-1", Token: "secret", PIDs: []int{4242, 4243}}
		if err := c.Register(ctx, "gpu-a", reg); err != nil {
			t.Fatal(err)
		}
		h.wantLast(t, "register", reg)
	})
	t.Run("status", func(t *testing.T) {
		got, err := c.Status(ctx, "gpu-a")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := h.Status(ctx)
		want.Sidecar = "gpu-a"
		want.Leases[0].Token = "" // never on the wire
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("status (-want +got):\n%s", diff)
		}
	})
	t.Run("release answers {}", func(t *testing.T) {
		nc := connect(t, e)
		m, err := nc.Request(v1.EndpointSubject("gpu-a", v1.EndpointRelease), []byte(`{"lease_id":"l-1","token":"x"}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != "{}" {
			t.Errorf("body %q, want {}", m.Data)
		}
	})
}

// failing embeds a working handler and makes chosen methods fail.
type failing struct {
	*fakeHandler
	admitErr, renewErr, releaseErr, statusErr error
}

func (f failing) Admit(context.Context, *v1.AdmitRequest) (*v1.Decision, error) {
	return nil, f.admitErr
}
func (f failing) Renew(context.Context, *v1.LeaseRef) (*v1.Lease, error) { return nil, f.renewErr }
func (f failing) Release(context.Context, *v1.LeaseRef) error            { return f.releaseErr }
func (f failing) Status(context.Context) (*v1.Status, error)             { return nil, f.statusErr }

func TestErrorsTravelInHeaders(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	serve(t, e, "gpu-a", failing{
		fakeHandler: newFakeHandler(),
		admitErr:    v1.Unavailable("mps daemon not ready"),
		renewErr:    v1.Forbidden("wrong token for lease l-1"),
		releaseErr:  fmt.Errorf("release: %w", v1.NotFound("lease l-9")),
		statusErr:   errors.New("boom\ninjected: header"),
	})
	c := NewClient(connect(t, e))
	ctx := testCtx(t)
	ref := &v1.LeaseRef{LeaseID: "l-1", Token: "x"}

	tests := []struct {
		name     string
		call     func() error
		code     int
		wantDesc string
	}{
		{"503 admit", func() error { _, err := c.Admit(ctx, "gpu-a", wiretest.AdmitRequest()); return err }, 503, "mps daemon not ready"},
		{"403 renew", func() error { _, err := c.Renew(ctx, "gpu-a", ref); return err }, 403, "wrong token for lease l-1"},
		{"404 wrapped", func() error { return c.Release(ctx, "gpu-a", ref) }, 404, "lease l-9"},
		{"500 plain error, one line", func() error { _, err := c.Status(ctx, "gpu-a"); return err }, 500, "boom injected: header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var be *v1.Error
			if !errors.As(err, &be) {
				t.Fatalf("error %v (%T) is not a *v1.Error", err, err)
			}
			if be.Code != tt.code || be.Description != tt.wantDesc {
				t.Errorf("got %d %q, want %d %q", be.Code, be.Description, tt.code, tt.wantDesc)
			}
			if v1.CodeOf(err) != tt.code {
				t.Errorf("CodeOf = %d, want %d", v1.CodeOf(err), tt.code)
			}
		})
	}
}

func TestBadRequestNamesTheField(t *testing.T) {
	t.Parallel()
	e, h := servedFake(t)
	nc := connect(t, e)

	tests := []struct {
		name, endpoint, body, want string
	}{
		{"wrong type", v1.EndpointAdmit, `{"job":{"id":"j","priority":"high"}}`, `job.priority: want a whole number`},
		{"unknown field", v1.EndpointAdmit, `{"request_id":"r","gpus":2}`, `gpus: want a known key`},
		{"not an object", v1.EndpointRenew, `[1,2]`, "must be a JSON object"},
		{"empty", v1.EndpointRegister, ``, "want a JSON document, got nothing"},
		{"pids not ints", v1.EndpointRegister, `{"lease_id":"l","token":"t","pids":["1"]}`, `pids[0]: want a whole number`},
		{"status with fields", v1.EndpointStatus, `{"verbose":true}`, `verbose: want a known key`},
		{"syntax", v1.EndpointRelease, `{"lease_id":`, "lease_id: want valid JSON: a value, got the end of the document (cut off)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := nc.Request(v1.EndpointSubject("gpu-a", tt.endpoint), []byte(tt.body), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			be := responseError(m)
			if be == nil {
				t.Fatalf("no error headers; body %q", m.Data)
			}
			if be.Code != v1.CodeBadRequest || !strings.Contains(be.Description, tt.want) {
				t.Errorf("got %d %q, want 400 containing %q", be.Code, be.Description, tt.want)
			}
		})
	}
	if req, _ := h.last("admit"); req != nil {
		t.Errorf("handler was called with %+v for a bad request", req)
	}
}

func TestNoSidecar(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	c := NewClient(connect(t, e))
	ctx := testCtx(t)
	if _, err := c.Admit(ctx, "gpu-none", wiretest.AdmitRequest()); !errors.Is(err, v1.ErrNoSidecar) {
		t.Errorf("Admit: got %v, want ErrNoSidecar", err)
	}
	if err := c.Release(ctx, "gpu-none", &v1.LeaseRef{}); !errors.Is(err, v1.ErrNoSidecar) {
		t.Errorf("Release: got %v, want ErrNoSidecar", err)
	}
	// Nobody listens on the quote subject: NATS says so at once.
	if _, err := c.Quote(ctx, wiretest.AdmitRequest(), 5*time.Second); !errors.Is(err, v1.ErrNoSidecar) {
		t.Errorf("Quote: got %v, want ErrNoSidecar", err)
	}
}

func TestClientRejectsBadSidecarID(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	c := NewClient(connect(t, e))
	for _, id := range []string{"", "a.b", "*", ">", "a b"} {
		if _, err := c.Status(testCtx(t), id); err == nil || errors.Is(err, v1.ErrNoSidecar) {
			t.Errorf("Status(%q): got %v, want an id error", id, err)
		}
	}
}

// quoteHandler answers quotes with its own decision.
type quoteHandler struct {
	*fakeHandler
	decision string
	err      error
}

func (q quoteHandler) Quote(ctx context.Context, req *v1.AdmitRequest) (*v1.Decision, error) {
	if q.err != nil {
		return nil, q.err
	}
	d := wiretest.Decision()
	d.Decision = q.decision
	return d, nil
}

func TestQuoteIsAnsweredByEverySidecar(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	serve(t, e, "gpu-a", quoteHandler{fakeHandler: newFakeHandler(), decision: v1.DecisionGrant})
	serve(t, e, "gpu-b", quoteHandler{fakeHandler: newFakeHandler(), decision: v1.DecisionDeny})
	serve(t, e, "gpu-c", quoteHandler{fakeHandler: newFakeHandler(), err: v1.Unavailable("predictor not ready")})
	c := NewClient(connect(t, e))

	got, err := c.Quote(testCtx(t), wiretest.AdmitRequest(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	bySidecar := map[string]string{}
	for _, d := range got {
		bySidecar[d.Sidecar] = d.Decision
		if d.Lease != nil {
			t.Errorf("quote from %s carries a lease", d.Sidecar)
		}
	}
	want := map[string]string{"gpu-a": v1.DecisionGrant, "gpu-b": v1.DecisionDeny}
	if diff := cmp.Diff(want, bySidecar); diff != "" {
		t.Errorf("quotes by sidecar (-want +got):\n%s", diff)
	}
}

func TestQuoteOnlyErrors(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	serve(t, e, "gpu-c", quoteHandler{fakeHandler: newFakeHandler(), err: v1.Unavailable("predictor not ready")})
	c := NewClient(connect(t, e))
	_, err := c.Quote(testCtx(t), wiretest.AdmitRequest(), 200*time.Millisecond)
	if v1.CodeOf(err) != v1.CodeUnavailable {
		t.Errorf("got %v (code %d), want a 503", err, v1.CodeOf(err))
	}
}

// tracingHandler starts the decision span from the handler's context, as
// the sidecar does.
type tracingHandler struct {
	*fakeHandler
	tracer trace.Tracer
}

func (h tracingHandler) Admit(ctx context.Context, req *v1.AdmitRequest) (*v1.Decision, error) {
	_, span := h.tracer.Start(ctx, "colocd.admit")
	defer span.End()
	return h.fakeHandler.Admit(ctx, req)
}

func TestTraceContextPropagates(t *testing.T) {
	t.Parallel()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	e := startServer(t)
	h := tracingHandler{fakeHandler: newFakeHandler(), tracer: tp.Tracer("sidecar")}
	serve(t, e, "gpu-a", h)
	c := NewClient(connect(t, e))

	ctx, launcher := tp.Tracer("launcher").Start(testCtx(t), "launcher.admit")
	if _, err := c.Admit(ctx, "gpu-a", wiretest.AdmitRequest()); err != nil {
		t.Fatal(err)
	}
	launcher.End()

	_, hctx := h.last("admit")
	remote := hctx.span
	if !remote.IsRemote() || !remote.Equal(launcher.SpanContext().WithRemote(true)) {
		t.Errorf("handler ctx span context %+v, want the launcher's %+v as remote", remote, launcher.SpanContext())
	}
	var decision sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == "colocd.admit" {
			decision = s
		}
	}
	if decision == nil {
		t.Fatal("no colocd.admit span recorded")
	}
	if decision.SpanContext().TraceID() != launcher.SpanContext().TraceID() {
		t.Errorf("decision trace %s, want the launcher's %s", decision.SpanContext().TraceID(), launcher.SpanContext().TraceID())
	}
	if decision.Parent().SpanID() != launcher.SpanContext().SpanID() || !decision.Parent().IsRemote() {
		t.Errorf("decision parent %+v, want remote %s", decision.Parent(), launcher.SpanContext().SpanID())
	}
}

func TestNoTraceContextWithoutSpan(t *testing.T) {
	t.Parallel()
	e, h := servedFake(t)
	c := NewClient(connect(t, e))
	if _, err := c.Status(testCtx(t), "gpu-a"); err != nil {
		t.Fatal(err)
	}
	if _, hctx := h.last("status"); hctx.span.IsValid() {
		t.Errorf("handler got a span context without one being sent")
	}
}

// gather sends a request and collects answers until n arrived.
func gather(t *testing.T, nc *nats.Conn, subject string, n int) []*nats.Msg {
	t.Helper()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	var out []*nats.Msg
	for len(out) < n {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("after %d of %d answers on %s: %v", len(out), n, subject, err)
		}
		out = append(out, m)
	}
	return out
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	serve(t, e, "gpu-a", newFakeHandler())
	serve(t, e, "gpu-b", newFakeHandler())
	nc := connect(t, e)

	var sidecars []string
	for _, m := range gather(t, nc, "$SRV.PING."+v1.ServiceName, 2) {
		var p micro.Ping
		if err := json.Unmarshal(m.Data, &p); err != nil {
			t.Fatal(err)
		}
		if p.Name != v1.ServiceName || p.Version != "1.2.3" {
			t.Errorf("ping: %+v", p)
		}
		sidecars = append(sidecars, p.Metadata["sidecar"])
	}
	slices.Sort(sidecars)
	if !slices.Equal(sidecars, []string{"gpu-a", "gpu-b"}) {
		t.Errorf("pinged sidecars %v, want [gpu-a gpu-b]", sidecars)
	}

	for _, m := range gather(t, nc, "$SRV.INFO."+v1.ServiceName, 2) {
		var info micro.Info
		if err := json.Unmarshal(m.Data, &info); err != nil {
			t.Fatal(err)
		}
		id := info.Metadata["sidecar"]
		got := map[string]string{}
		for _, ep := range info.Endpoints {
			got[ep.Subject] = ep.QueueGroup
		}
		want := map[string]string{
			"colocd.v1." + id + ".admit":    "q",
			"colocd.v1." + id + ".renew":    "q",
			"colocd.v1." + id + ".release":  "q",
			"colocd.v1." + id + ".register": "q",
			"colocd.v1." + id + ".status":   "q",
			"colocd.v1." + id + ".profile":  "q",
			"colocd.v1." + id + ".quote":    "q",
			"colocd.v1." + id + ".watch":    "q",
			"colocd.v1.fleet":               "q", // one sidecar answers
			"colocd.v1.quote":               "",  // no queue group: every sidecar answers
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s endpoints, subject → queue group (-want +got):\n%s", id, diff)
		}
	}
}

func TestServeValidates(t *testing.T) {
	t.Parallel()
	nc := connect(t, startServer(t))
	// Ids that are not one subject token (a dot, wildcards, a space,
	// nothing), and a version that is not semver.
	for _, bad := range []struct{ id, version string }{
		{"gpu.0", "1.0.0"}, {"gpu*", "1.0.0"}, {">", "1.0.0"}, {"gpu 0", "1.0.0"}, {"", "1.0.0"},
		{"gpu-0", "dev"},
	} {
		if s, err := Serve(nc, bad.id, bad.version, newFakeHandler()); err == nil {
			_ = s.Stop()
			t.Errorf("Serve(%q, %q) succeeded", bad.id, bad.version)
		}
	}
}

// blockingRenews holds every renew until its gate opens.
type blockingRenews struct {
	*fakeHandler
	*gate
}

func (b *blockingRenews) Renew(ctx context.Context, _ *v1.LeaseRef) (*v1.Lease, error) {
	b.pass(ctx)
	return nil, v1.Forbidden("wrong token")
}

// A flood of renews that nobody waits for, while the handler is stuck and
// the rate lets them all in, is held in bounded queues: the handler sees
// at most its workers and the tenant's share of the lease queue, the rest
// are refused at once (or dropped by the server past the endpoint's
// queue), and the service answers again afterwards.
func TestEndpointQueueIsBounded(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	h := &blockingRenews{fakeHandler: newFakeHandler(), gate: newGate()}
	limits := Limits{TenantRate: 1e6, TenantBurst: MaxLimit}
	// Drops past the endpoint's queue are logged (TestLogHandlersLogSlowConsumers): not here.
	side := connect(t, e, ErrorLogHandler(slog.New(slog.DiscardHandler)))
	s, err := Serve(side, "gpu-a", "1.2.3", h, WithLimits(limits))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	released := false
	release := func() {
		if !released {
			released = true
			close(h.open)
		}
	}
	t.Cleanup(release) // before Stop: a worker held by the handler lets go
	flood := connect(t, e)
	body := []byte(`{"lease_id":"l-1","token":"x"}`)
	const sent = EndpointPendingMsgs * 3
	for i := range sent {
		if err := flood.PublishRequest(v1.EndpointSubject("gpu-a", v1.EndpointRenew), "_INBOX.flood."+strconv.Itoa(i), body); err != nil {
			t.Fatal(err)
		}
	}
	if err := flood.Flush(); err != nil {
		t.Fatal(err)
	}
	// The server has routed the whole flood; a round trip of the service's
	// own connection comes back behind it, so every flooded request has
	// then reached the service's connection, and those past the endpoint's
	// pending limit are dropped: none can still be on its way when the
	// workers are released, however busy the machine.
	if err := side.Flush(); err != nil {
		t.Fatal(err)
	}
	// Every flooded request is taken off the endpoint's queue: queued for
	// a worker, refused, or dropped by the connection past its limits.
	lim := s.limits
	for end := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		s.leaseQ.mu.Lock()
		queued := s.leaseQ.n
		s.leaseQ.mu.Unlock()
		if queued >= lim.TenantLeaseQueue {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d renews queued a minute into a flood of %d, want the tenant's share %d", queued, sent, lim.TenantLeaseQueue)
		}
	}
	release()
	c := NewClient(connect(t, e))
	probes := int64(0)
	for end := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		probes++
		_, err := c.Renew(testCtx(t), "gpu-a", &v1.LeaseRef{LeaseID: "l-1", Token: "x"})
		if v1.CodeOf(err) == v1.CodeForbidden {
			break // answered again
		}
		if time.Now().After(end) {
			t.Fatalf("no answer a minute after the flood: %v", err)
		}
	}
	// The workers, the tenant's share of the queue, and what waited in
	// the endpoint's own queue behind them, with those already on their
	// way when it filled (more on a busy machine: at most as many again):
	// a bound, far from the flood.
	if got, bound := h.reached.Load()-probes, int64(lim.LeaseWorkers+lim.TenantLeaseQueue+2*EndpointPendingMsgs); got > bound {
		t.Errorf("the handler saw %d of %d flooded renews, want at most %d", got, sent, bound)
	}
}
