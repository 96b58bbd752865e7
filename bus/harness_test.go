package bus

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/internal/wiretest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/google/go-cmp/cmp"
)

// startServer runs a real nats-server in the process with JetStream in a
// fresh directory, shut down at the end of the test.
func startServer(t testing.TB) *natsserver.Embedded {
	t.Helper()
	return startServerIn(t, t.TempDir())
}

func startServerIn(t testing.TB, dir string) *natsserver.Embedded {
	t.Helper()
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: dir, SidecarID: "gpu-a"})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

// connect opens an in-process connection closed at the end of the test.
func connect(t testing.TB, e *natsserver.Embedded, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := e.Conn(opts...)
	if err != nil {
		t.Fatalf("Conn: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// serve starts a sidecar service with id on its own connection.
func serve(t testing.TB, e *natsserver.Embedded, id string, h Handler) *Service {
	t.Helper()
	return serveOn(t, connect(t, e), id, h)
}

// servedFake starts a server on which a fake handler serves gpu-a, and
// returns the server and the handler.
func servedFake(t testing.TB) (*natsserver.Embedded, *fakeHandler) {
	t.Helper()
	e, h := startServer(t), newFakeHandler()
	serve(t, e, "gpu-a", h)
	return e, h
}

// serveOn is serve on the connection nc.
func serveOn(t testing.TB, nc *nats.Conn, id string, h Handler) *Service {
	t.Helper()
	s, err := Serve(nc, id, "1.2.3", h)
	if err != nil {
		t.Fatalf("Serve(%q): %v", id, err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

// jetStreamOf opens JetStream on a new connection to e.
func jetStreamOf(t testing.TB, e *natsserver.Embedded) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(connect(t, e))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// leaseBucket opens gpu-a's lease bucket over nc and puts one record,
// lease-1, in it; it returns the bucket and nc's JetStream.
func leaseBucket(t testing.TB, ctx context.Context, nc *nats.Conn, record string) (*KV, jetstream.JetStream) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := OpenKV(ctx, js, v1.LeaseBucketName("gpu-a"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "lease-1", []byte(record)); err != nil {
		t.Fatal(err)
	}
	return kv, js
}

// mustPublish publishes each of vs (events, capacity summaries) in turn,
// failing t on an error.
func mustPublish[V any](t testing.TB, ctx context.Context, p interface {
	Publish(context.Context, V) error
}, vs ...V) {
	t.Helper()
	for _, v := range vs {
		if err := p.Publish(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeHandler answers every endpoint with fixed values and records the
// last request of each method and what its context carried.
type fakeHandler struct {
	mu   sync.Mutex
	reqs map[string]any
	seen map[string]handlerCtx
}

// handlerCtx is what a handler's context carried: its deadline and span.
type handlerCtx struct {
	deadline    time.Time
	hasDeadline bool
	span        trace.SpanContext
}

func (c handlerCtx) Deadline() (time.Time, bool) { return c.deadline, c.hasDeadline }

func newFakeHandler() *fakeHandler {
	return &fakeHandler{reqs: map[string]any{}, seen: map[string]handlerCtx{}}
}

func (f *fakeHandler) record(ctx context.Context, method string, req any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs[method] = req
	d, ok := ctx.Deadline()
	f.seen[method] = handlerCtx{deadline: d, hasDeadline: ok, span: trace.SpanContextFromContext(ctx)}
}

func (f *fakeHandler) last(method string) (any, handlerCtx) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[method], f.seen[method]
}

// wantLast fails t unless the last request of method that f saw is want.
func (f *fakeHandler) wantLast(t *testing.T, method string, want any, opts ...cmp.Option) {
	t.Helper()
	got, _ := f.last(method)
	if diff := cmp.Diff(want, got, opts...); diff != "" {
		t.Errorf("the handler's %s request (-want +got):\n%s", method, diff)
	}
}

func (f *fakeHandler) Admit(ctx context.Context, req *v1.AdmitRequest) (*v1.Decision, error) {
	f.record(ctx, "admit", req)
	return wiretest.Decision(), nil
}

func (f *fakeHandler) Quote(ctx context.Context, req *v1.AdmitRequest) (*v1.Decision, error) {
	f.record(ctx, "quote", req)
	return wiretest.Decision(), nil
}

func (f *fakeHandler) Renew(ctx context.Context, ref *v1.LeaseRef) (*v1.Lease, error) {
	f.record(ctx, "renew", ref)
	return wiretest.Lease(), nil
}

func (f *fakeHandler) Release(ctx context.Context, ref *v1.LeaseRef) error {
	f.record(ctx, "release", ref)
	return nil
}

func (f *fakeHandler) Register(ctx context.Context, req *v1.RegisterRequest) error {
	f.record(ctx, "register", req)
	return nil
}

func (f *fakeHandler) HasProfile(ctx context.Context, ref string) (bool, error) {
	f.record(ctx, "has-profile", ref)
	return false, nil
}

func (f *fakeHandler) PutProfile(ctx context.Context, raw []byte) (string, error) {
	f.record(ctx, "put-profile", len(raw))
	return v1.ProfileRef(raw), nil
}

func (f *fakeHandler) Status(ctx context.Context) (*v1.Status, error) {
	f.record(ctx, "status", nil)
	return &v1.Status{
		GPU:      v1.GPUStatus{UUID: "GPU-1", Name: "NVIDIA H200", MemoryTotalMiB: 143771, MemoryFreeMiB: 100000},
		Mode:     "mps",
		Ready:    true,
		Health:   map[string]string{"gpu": "ok", "mps": "ok", "predictor": "ok", "nats": "ok"},
		Services: []v1.ServiceStatus{{Name: "bert", RateRPS: 120, SLOP99MS: 15, PredictedP99MS: 12.9}},
		Leases:   []v1.Lease{*wiretest.Lease()},
	}, nil
}
