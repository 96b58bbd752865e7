package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
)

// Sidecars finds every sidecar that serves on the bus, each once, and
// skips answers that are not a colocd service's; with none it says so at
// once.
func TestSidecars(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	c := NewClient(connect(t, e))
	ctx := testCtx(t)
	start := time.Now()
	if ids, err := c.Sidecars(ctx, time.Minute); !errors.Is(err, v1.ErrNoSidecar) {
		t.Fatalf("with no sidecar: %v %v, want ErrNoSidecar", ids, err)
	}
	if d := time.Since(start); d > 30*time.Second { // a watchdog: "no responders" ends it, not the minute
		t.Errorf("with no sidecar it took %s", d)
	}
	serve(t, e, "gpu-b", newFakeHandler())
	serve(t, e, "gpu-a", newFakeHandler())
	// Forged answers: not micro's, another service's, a bad id, and gpu-a
	// a second time.
	forger := connect(t, e)
	sub, err := forger.Subscribe(DiscoverSubject, func(m *nats.Msg) {
		for _, a := range []string{`not json`, `{"type":"io.nats.micro.v1.ping_response","name":"other","metadata":{"sidecar":"gpu-x"}}`,
			`{"type":"io.nats.micro.v1.ping_response","name":"colocd","metadata":{"sidecar":"bad id>"}}`,
			`{"type":"io.nats.micro.v1.ping_response","name":"colocd","metadata":{"sidecar":"gpu-a"}}`} {
			_ = m.Respond([]byte(a))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}
	ids, err := c.Sidecars(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpu-a", "gpu-b"}, ids); diff != "" {
		t.Errorf("Sidecars (-want +got):\n%s", diff)
	}
	if _, err := c.Sidecars(ctx, 0); err == nil {
		t.Error("a wait of 0 was taken")
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Sidecars(done, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("with ctx ended: %v, want context.Canceled", err)
	}
}
