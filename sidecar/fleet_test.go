package sidecar

import (
	"context"
	"testing"

	"github.com/colocd/colocd/bus"
)

// A sidecar keeps its capacity summary in the fleet's bucket: at start,
// after a lease changes, and gone after a clean stop.
func TestCapacitySummary(t *testing.T) {
	s := start(t, testConfig(t, "gpu-a", 10000), Options{})
	c := client(t, s)
	nc := sidecarConn(t, s)
	ctx := context.Background()
	read := func() *bus.Capacity {
		got, bad, err := bus.ReadCapacities(ctx, nc, "")
		if err != nil || len(bad) != 0 || len(got) > 1 {
			t.Fatalf("read: %v %v %v", got, bad, err)
		}
		if len(got) == 0 {
			return nil
		}
		return got[0]
	}
	var first *bus.Capacity
	if !eventually(ctx, func() bool { first = read(); return first != nil }) {
		t.Fatal("no summary after the start")
	}
	if first.Sidecar != "gpu-a" || !first.Healthy || first.GPU.Name != "NVIDIA H200" || first.Leases != 0 || first.MaxJobs != 3 ||
		first.TypicalPct != 100 || len(first.Services) != 1 || first.Services[0].Name != "v100-infer" || first.FreeMemoryMiB <= 0 || first.Mode != "mps" {
		t.Fatalf("summary %+v", first)
	}
	if _, err := c.Admit(ctx, s.ID(), admitReq("job-1", 10, 100)); err != nil {
		t.Fatal(err)
	}
	var after *bus.Capacity
	if !eventually(ctx, func() bool { after = read(); return after != nil && after.Leases == 1 }) {
		t.Fatalf("after a grant: %+v", after)
	}
	if after.FreeMemoryMiB >= first.FreeMemoryMiB || after.Margin >= first.Margin {
		t.Errorf("after a grant: memory %d MiB (was %d), margin %v (was %v): want both lower", after.FreeMemoryMiB, first.FreeMemoryMiB, after.Margin, first.Margin)
	}
}

// On a server that sidecars share, a launcher with the documented
// permissions reads every sidecar's summary, and a sidecar that stops
// cleanly withdraws its own.
func TestCapacitySummariesOnASharedServer(t *testing.T) {
	url, sidecarSeed, launcherSeed := externalNATS(t)
	var running []*running
	for _, id := range []string{"gpu-a", "gpu-b"} {
		cfg := testConfig(t, id, 10000)
		cfg.NATS.URL, cfg.NATS.NKey = url, sidecarSeed
		running = append(running, start(t, cfg, Options{}))
	}
	nc, err := bus.Connect(url, bus.ConnectOptions{Name: "launcher", NKeySeedFile: launcherSeed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := context.Background()
	ids := func() map[string]bool {
		got, bad, err := bus.ReadCapacities(ctx, nc, "")
		if err != nil || len(bad) != 0 {
			t.Fatalf("read: %v %v", bad, err)
		}
		out := map[string]bool{}
		for _, c := range got {
			out[c.Sidecar] = true
		}
		return out
	}
	if !eventually(ctx, func() bool { got := ids(); return got["gpu-a"] && got["gpu-b"] }) {
		t.Fatalf("summaries of %v, want gpu-a and gpu-b", ids())
	}
	if err := running[1].stop(); err != nil {
		t.Fatal(err)
	}
	if !eventually(ctx, func() bool { got := ids(); return got["gpu-a"] && !got["gpu-b"] }) {
		t.Errorf("after gpu-b stopped: %v", ids())
	}
}
