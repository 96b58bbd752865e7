package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// capacitiesServer starts a server and opens its capacity bucket with ttl.
func capacitiesServer(t *testing.T, ttl time.Duration) (*natsserver.Embedded, *nats.Conn, *Capacities) {
	t.Helper()
	e := startServer(t)
	nc, caps := openCapacities(t, e, ttl)
	return e, nc, caps
}

// openCapacities connects to e and opens the capacity bucket with ttl.
func openCapacities(t *testing.T, e *natsserver.Embedded, ttl time.Duration) (*nats.Conn, *Capacities) {
	t.Helper()
	nc := connect(t, e)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := OpenCapacities(testCtx(t), js, 1, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return nc, caps
}

func testCapacity(id string) *Capacity {
	c := &Capacity{Format: CapacityFormat, Sidecar: id, Mode: "mps", Healthy: true, FreeMemoryMiB: 40000, MaxJobs: 4,
		Margin: 0.3, TypicalPct: 60, UpdatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Services: []CapacityService{{Name: "bert", SLOP99MS: 15, PredictedP99MS: 9.45, Margin: 0.3}}}
	c.GPU.Name, c.GPU.UUID, c.GPU.SMs = "NVIDIA H200", "GPU-x", 132
	return c
}

// Summaries go in and come back in one direct get; a withdrawn one is gone;
// one forged under another sidecar's key, or not a summary, is reported,
// not returned.
func TestCapacitiesRoundTrip(t *testing.T) {
	t.Parallel()
	_, nc, caps := capacitiesServer(t, time.Minute)
	ctx := testCtx(t)
	if got, bad, err := ReadCapacities(ctx, nc, ""); err != nil || len(got) != 0 || len(bad) != 0 {
		t.Fatalf("empty bucket: %v %v %v", got, bad, err)
	}
	ids := []string{"gpu-a", "gpu-b", "GPU-5f2d8c4e-1a2b-3c4d-5e6f-7a8b9c0d1e2f", "ünïcode"}
	for _, id := range ids {
		mustPublish(t, ctx, caps, testCapacity(id))
	}
	if err := caps.Withdraw(ctx, "gpu-b"); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, _ := js.KeyValue(ctx, CapacityBucket)
	forged, _ := json.Marshal(testCapacity("gpu-a"))
	if _, err := kv.Put(ctx, CapacityKey("gpu-z"), forged); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, CapacityKey("gpu-y"), []byte(`{"format":"colocd.capacity/v1","sidecar":"gpu-y","typical_pct":1e9}`)); err != nil {
		t.Fatal(err)
	}
	got, bad, err := ReadCapacities(ctx, nc, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Sidecar)
	}
	slices.Sort(names)
	if want := []string{"GPU-5f2d8c4e-1a2b-3c4d-5e6f-7a8b9c0d1e2f", "gpu-a", "ünïcode"}; !slices.Equal(names, want) {
		t.Errorf("read %v, want %v", names, want)
	}
	if len(bad) != 2 || !strings.Contains(fmt.Sprint(bad), "the id its key names") || !strings.Contains(fmt.Sprint(bad), "typical_pct") {
		t.Errorf("bad %v: want the forged key and the unbounded number", bad)
	}
}

// A fleet larger than one batch (1,024 keys) is read shard by shard.
func TestCapacitiesManyShards(t *testing.T) {
	t.Parallel()
	_, nc, caps := capacitiesServer(t, time.Minute)
	ctx := testCtx(t)
	const n = 1100
	for i := range n {
		mustPublish(t, ctx, caps, testCapacity(fmt.Sprintf("gpu-%04d", i)))
	}
	if _, _, err := readShard(ctx, nc, "$JS.API.DIRECT.GET.KV_"+CapacityBucket, "$KV."+CapacityBucket+".>"); !errors.Is(err, errTooManyResults) {
		t.Fatalf("one batch of %d keys: %v, want too many results", n, err)
	}
	got, bad, err := ReadCapacities(ctx, nc, "")
	if err != nil || len(got) != n || len(bad) != 0 {
		t.Fatalf("read %d (bad %v, err %v), want %d", len(got), bad, err, n)
	}
}

// A summary not rewritten within the bucket's TTL is gone.
func TestCapacityTTL(t *testing.T) {
	t.Parallel()
	_, nc, caps := capacitiesServer(t, time.Second)
	ctx := testCtx(t)
	mustPublish(t, ctx, caps, testCapacity("gpu-dead"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _, err := ReadCapacities(ctx, nc, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the summary outlived its TTL: %+v", got[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCapacityKey(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"gpu-a", "GPU-5f2d8c4e-1a2b-3c4d-5e6f-7a8b9c0d1e2f", "ünïcode", "a/b=c"} {
		k := CapacityKey(id)
		if idOfKey(k) != id || strings.ContainsFunc(k, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.", r))
		}) {
			t.Errorf("key %q of %q", k, id)
		}
	}
	for _, k := range []string{"", "x", "0.!!", "g.Z3B1LWE", "10.Z3B1LWE"} {
		if id := idOfKey(k); id != "" {
			t.Errorf("idOfKey(%q) = %q, want none", k, id)
		}
	}
}

// FuzzDecodeCapacity: whatever the bucket holds, decoding returns a summary
// within bounds or an error, never a panic.
func FuzzDecodeCapacity(f *testing.F) {
	good, _ := json.Marshal(testCapacity("gpu-a"))
	f.Add(CapacityKey("gpu-a"), good)
	f.Add("", []byte(`{"format":"colocd.capacity/v1","sidecar":"x","margin":"NaN"}`))
	f.Add("0.eA", []byte(`{`))
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		c, err := DecodeCapacity(key, data)
		if err != nil {
			return
		}
		if c.TypicalPct < 0 || c.TypicalPct > 100 || len(c.Services) > maxCapacityServices || !finiteIn(c.Margin, -1e6, 1) || v1.ValidateSidecarID(c.Sidecar) != nil {
			t.Fatalf("decoded out of bounds: %+v", c)
		}
	})
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
	if err := nc.PublishRequest("$JS.API.DIRECT.GET.KV_"+CapacityBucket, nc.NewInbox(), []byte(`{"multi_last":["$KV.colocd-fleet.>"]}`)); err != nil {
		t.Fatal(err)
	}
	v.waitFor(t, "$JS.API.DIRECT.GET")
	forged, _ := json.Marshal(testCapacity("gpu-x"))
	if err := nc.Publish("$KV."+CapacityBucket+"."+CapacityKey("gpu-x"), forged); err != nil {
		t.Fatal(err)
	}
	v.waitFor(t, "$KV."+CapacityBucket)
	if got, _, _ := ReadCapacities(ctx, side, ""); len(got) != 1 {
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

// A batch that ends early (at its byte limit) with summaries still pending
// is read on from where it stopped: all of them, each once.
func TestCapacitiesBatchEndsEarly(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()}))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	caps, err := OpenCapacities(ctx, js, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		c := testCapacity(fmt.Sprintf("gpu-%03d", i))
		for j := range 10 { // about 1.3 KB each: 260 KB in all
			c.Services = append(c.Services, CapacityService{Name: fmt.Sprintf("service-with-a-long-name-%02d", j), SLOP99MS: 15, PredictedP99MS: 9, Margin: 0.3})
		}
		mustPublish(t, ctx, caps, c)
	}
	got, bad, err := ReadCapacities(ctx, nc, "")
	if err != nil || len(bad) != 0 {
		t.Fatalf("read: %v %v", bad, err)
	}
	seen := map[string]bool{}
	for _, c := range got {
		if seen[c.Sidecar] {
			t.Errorf("%s read twice", c.Sidecar)
		}
		seen[c.Sidecar] = true
	}
	if len(seen) != n {
		t.Errorf("read %d distinct summaries, want %d", len(seen), n)
	}
}

// The sidecar that takes a fleet read may go before it answers (its
// cluster node killed): Capacities asks again, and another sidecar
// answers, well before the caller's deadline.
func TestCapacitiesAsksAgainWhenNoAnswerComes(t *testing.T) {
	t.Parallel()
	e, nc, caps := capacitiesServer(t, time.Minute)
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
		caps []*Capacity
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
