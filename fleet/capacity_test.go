package fleet

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

// capacitiesServer starts the sidecar's embedded server and opens its
// capacity bucket with ttl over a connection of the sidecar's.
func capacitiesServer(t *testing.T, ttl time.Duration) (*nats.Conn, *Capacities) {
	t.Helper()
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: t.TempDir(), SidecarID: "gpu-a"})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := e.Conn()
	if err != nil {
		t.Fatalf("Conn: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc, openCapacities(t, nc, ttl)
}

// openCapacities opens the capacity bucket over nc with ttl.
func openCapacities(t *testing.T, nc *nats.Conn, ttl time.Duration) *Capacities {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := OpenCapacities(testCtx(t), js, 1, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return caps
}

// publish writes c in caps, failing t on an error.
func publish(t *testing.T, ctx context.Context, caps *Capacities, c *Capacity) {
	t.Helper()
	if err := caps.Publish(ctx, c); err != nil {
		t.Fatal(err)
	}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
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
	nc, caps := capacitiesServer(t, time.Minute)
	ctx := testCtx(t)
	if got, bad, err := ReadCapacities(ctx, nc, ""); err != nil || len(got) != 0 || len(bad) != 0 {
		t.Fatalf("empty bucket: %v %v %v", got, bad, err)
	}
	ids := []string{"gpu-a", "gpu-b", "GPU-5f2d8c4e-1a2b-3c4d-5e6f-7a8b9c0d1e2f", "ünïcode"}
	for _, id := range ids {
		publish(t, ctx, caps, testCapacity(id))
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
	nc, caps := capacitiesServer(t, time.Minute)
	ctx := testCtx(t)
	const n = 1100
	for i := range n {
		publish(t, ctx, caps, testCapacity(fmt.Sprintf("gpu-%04d", i)))
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
	nc, caps := capacitiesServer(t, time.Second)
	ctx := testCtx(t)
	publish(t, ctx, caps, testCapacity("gpu-dead"))
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

// A batch that ends early (at its byte limit) with summaries still pending
// is read on from where it stopped: all of them, each once.
func TestCapacitiesBatchEndsEarly(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()}))
	ctx := testCtx(t)
	caps := openCapacities(t, nc, time.Minute)
	const n = 200
	for i := range n {
		c := testCapacity(fmt.Sprintf("gpu-%03d", i))
		for j := range 10 { // about 1.3 KB each: 260 KB in all
			c.Services = append(c.Services, CapacityService{Name: fmt.Sprintf("service-with-a-long-name-%02d", j), SLOP99MS: 15, PredictedP99MS: 9, Margin: 0.3})
		}
		publish(t, ctx, caps, c)
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
