package bus

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/fleet"

	"github.com/nats-io/nats.go"
)

// testCapacity is a summary of sidecar id that decodes.
func testCapacity(id string) *fleet.Capacity {
	return &fleet.Capacity{Format: fleet.CapacityFormat, Sidecar: id, Mode: "mps", Healthy: true, FreeMemoryMiB: 40000, MaxJobs: 4, TypicalPct: 60}
}

// openCapacities connects to e and opens the capacity bucket with ttl.
func openCapacities(t *testing.T, e *natsserver.Embedded, ttl time.Duration) (*nats.Conn, *fleet.Capacities) {
	t.Helper()
	nc := connect(t, e)
	caps, err := fleet.OpenCapacities(testCtx(t), jetStreamOf(t, e), 1, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return nc, caps
}

// A client that reads the summaries with no deadline of its own waits as
// long as ReadCapacities does.
func TestReadTimeoutIsTheClients(t *testing.T) {
	t.Parallel()
	if fleet.ReadTimeout != DefaultTimeout {
		t.Errorf("fleet.ReadTimeout %v, DefaultTimeout %v: want one bound", fleet.ReadTimeout, DefaultTimeout)
	}
}

// A launcher reads the summaries through a sidecar (colocd.v1.fleet), not
// with a direct get of its own, and cannot write one.
func TestLauncherReadsCapacities(t *testing.T) {
	t.Parallel()
	e, seed := authServer(t)
	serve(t, e, "gpu-a", newFakeHandler())
	side, caps := openCapacities(t, e, time.Minute)
	ctx := testCtx(t)
	mustPublish(t, ctx, caps, testCapacity("gpu-a"))
	nc, v := launcherConn(t, e, seed)
	got, bad, err := NewClient(nc, WithTimeout(5*time.Second)).Capacities(ctx)
	if err != nil || len(got) != 1 || len(bad) != 0 || got[0].Sidecar != "gpu-a" {
		t.Fatalf("launcher read %v %v %v", got, bad, err)
	}
	// Its own direct get is refused: JetStream would answer on any reply
	// subject it names, the JetStream API's too.
	if err := nc.PublishRequest("$JS.API.DIRECT.GET.KV_"+fleet.CapacityBucket, nc.NewInbox(), []byte(`{"multi_last":["$KV.colocd-fleet.>"]}`)); err != nil {
		t.Fatal(err)
	}
	v.waitFor(t, "$JS.API.DIRECT.GET")
	forged, _ := json.Marshal(testCapacity("gpu-x"))
	if err := nc.Publish("$KV."+fleet.CapacityBucket+"."+fleet.CapacityKey("gpu-x"), forged); err != nil {
		t.Fatal(err)
	}
	v.waitFor(t, "$KV."+fleet.CapacityBucket)
	if got, _, _ := fleet.ReadCapacities(ctx, side, ""); len(got) != 1 {
		t.Errorf("a launcher's publish reached the bucket: %d summaries", len(got))
	}
}

// A request whose reply subject is not an inbox goes unanswered: the
// answer, published with the sidecar's identity, could be a JetStream API
// call (here a purge of the sidecar's lease bucket).
func TestNoAnswerOutsideAnInbox(t *testing.T) {
	t.Parallel()
	e, seed := authServer(t)
	serve(t, e, "gpu-a", newFakeHandler())
	side := connect(t, e)
	ctx := testCtx(t)
	kv, _ := leaseBucket(t, ctx, side, `{}`)
	nc, err := Connect(e.ClientURL(), ConnectOptions{Name: "launcher", NKeySeedFile: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	purge := "$JS.API.STREAM.PURGE.KV_" + v1.LeaseBucketName("gpu-a")
	for _, subject := range []string{v1.EndpointSubject("gpu-a", v1.EndpointStatus), v1.EndpointSubject("gpu-a", v1.QuoteOneToken), v1.FleetSubject, v1.QuoteSubject} {
		if err := nc.PublishRequest(subject, purge, []byte(`{"garbage`)); err != nil {
			t.Fatal(err)
		}
	}
	// A real request after them: by its answer the others were handled.
	if _, err := NewClient(nc).Status(ctx, "gpu-a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := kv.Get(ctx, "lease-1"); err != nil {
		t.Errorf("the lease record is gone: %v", err)
	}
}

// The sidecar that takes a fleet read may go before it answers (its
// cluster node killed): Capacities asks again, and another sidecar
// answers, well before the caller's deadline.
func TestCapacitiesAsksAgainWhenNoAnswerComes(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	nc, caps := openCapacities(t, e, time.Minute)
	ctx := testCtx(t)
	mustPublish(t, ctx, caps, testCapacity("gpu-a"))
	// A member of the endpoint's queue group that takes the request and
	// dies with it.
	lost := make(chan struct{})
	stall, err := nc.QueueSubscribe(v1.FleetSubject, "q", func(*nats.Msg) { close(lost) })
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := NewClient(connect(t, e), WithTimeout(time.Minute))
	type result struct {
		caps []*fleet.Capacity
		err  error
	}
	done := make(chan result, 1)
	go func() {
		got, _, err := c.Capacities(context.Background())
		done <- result{got, err}
	}()
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("the read never came")
	}
	if err := stall.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	serveOn(t, nc, "gpu-a", newFakeHandler())
	select {
	case r := <-done:
		if r.err != nil || len(r.caps) != 1 || r.caps[0].Sidecar != "gpu-a" {
			t.Fatalf("after a lost read: %v, %v", r.caps, r.err)
		}
	case <-ctx.Done():
		t.Fatal("Capacities did not ask again")
	}
}
