package sidecar

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/fleet"
	"github.com/colocd/colocd/launch"
)

// A sidecar keeps its capacity summary in the fleet's bucket: at start,
// after a lease changes, and gone after a clean stop.
func TestCapacitySummary(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "gpu-a", 10000), Options{})
	c := client(t, s)
	nc := sidecarConn(t, s)
	ctx := context.Background()
	read := func() *fleet.Capacity {
		got, bad, err := fleet.ReadCapacities(ctx, nc, "")
		if err != nil || len(bad) != 0 || len(got) > 1 {
			t.Fatalf("read: %v %v %v", got, bad, err)
		}
		if len(got) == 0 {
			return nil
		}
		return got[0]
	}
	var first *fleet.Capacity
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
	var after *fleet.Capacity
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
	t.Parallel()
	url, sidecarSeed, launcherSeed := externalNATS(t)
	var running []*running
	for _, id := range []string{"gpu-a", "gpu-b"} {
		cfg := testConfig(t, id, 10000)
		cfg.NATS.URL, cfg.NATS.NKey = url, sidecarSeed
		running = append(running, start(t, cfg, Options{}))
	}
	lc := launcherClient(t, url, launcherSeed)
	ctx := context.Background()
	ids := func() map[string]bool {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, bad, err := lc.Capacities(rctx)
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

// colocd place's client call on a fleet of three sidecars that share a
// server: it ranks them by their summaries, quotes the best, admits at the
// highest percentage; a full sidecar drops out of the ranking; two jobs
// that race for the last slot both land, on different GPUs.
func TestPlace(t *testing.T) {
	t.Parallel()
	url, sidecarSeed, launcherSeed := externalNATS(t)
	slo := map[string]float64{"gpu-a": 10000, "gpu-b": p99At(t, 50) * 1.02 / 0.9, "gpu-c": 1}
	for _, id := range []string{"gpu-a", "gpu-b", "gpu-c"} {
		cfg := testConfig(t, id, slo[id])
		cfg.NATS.URL, cfg.NATS.NKey = url, sidecarSeed
		if id == "gpu-a" {
			cfg.Admission.MaxJobs = 1
		}
		start(t, cfg, Options{})
	}
	lc := launcherClient(t, url, launcherSeed)
	ctx := context.Background()
	read := func() []*fleet.Capacity {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, _, _ := lc.Capacities(rctx)
		return got
	}
	if !eventually(ctx, func() bool { return len(read()) == 3 }) {
		t.Fatal("three summaries never came")
	}
	p, err := fleet.Place(ctx, lc, admitReq("job-1", 10, 100), fleet.PlaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Sidecar != "gpu-a" || p.Decision.Decision != v1.DecisionGrant || p.Decision.Lease == nil || p.Summaries != 3 ||
		len(p.Candidates) != 3 || p.Candidates[0] != "gpu-a" || p.Candidates[2] != "gpu-c" || len(p.Quotes) != 3 || len(p.Tried) != 1 {
		t.Fatalf("placement %+v: want gpu-a, ranked first of three, quoted with the others", p)
	}
	// gpu-a is full (max_jobs 1): once its summary says so, it is no
	// candidate, and the next job goes to gpu-b, throttled.
	if !eventually(ctx, func() bool {
		for _, c := range read() {
			if c.Sidecar == "gpu-a" {
				return c.Leases == 1
			}
		}
		return false
	}) {
		t.Fatal("gpu-a's summary never showed its lease")
	}
	p2, err := fleet.Place(ctx, lc, admitReq("job-2", 10, 100), fleet.PlaceOptions{K: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p2.Sidecar != "gpu-b" || slices.Contains(p2.Candidates, "gpu-a") || len(p2.Quotes) != 1 {
		t.Errorf("second placement %+v: want gpu-b alone quoted, gpu-a no candidate", p2)
	}
}

// Two jobs that race for one GPU's last slot both land: the admit that
// loses (a deny) tries the next quote.
func TestPlaceLostRace(t *testing.T) {
	t.Parallel()
	url, sidecarSeed, launcherSeed := externalNATS(t)
	for _, id := range []string{"gpu-a", "gpu-b"} {
		cfg := testConfig(t, id, 10000)
		cfg.NATS.URL, cfg.NATS.NKey = url, sidecarSeed
		cfg.Admission.MaxJobs = 1
		start(t, cfg, Options{})
	}
	lc := launcherClient(t, url, launcherSeed)
	ctx := context.Background()
	if !eventually(ctx, func() bool {
		p, err := fleet.Place(ctx, lc, admitReq("probe", 200, 100), fleet.PlaceOptions{}) // min above max: every sidecar refuses it (400)
		return err != nil && p != nil && p.Summaries == 2
	}) {
		t.Fatal("two summaries never came")
	}
	var placed [2]*fleet.Placement
	errs := make(chan error, 2)
	for i := range placed {
		go func() {
			var err error
			placed[i], err = fleet.Place(ctx, lc, admitReq(fmt.Sprint("job-", i), 10, 100), fleet.PlaceOptions{K: 2})
			errs <- err
		}()
	}
	for range placed {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if placed[0].Sidecar == placed[1].Sidecar {
		t.Errorf("both on %s: %+v %+v", placed[0].Sidecar, placed[0], placed[1])
	}
}

// When every quoted sidecar denies the job, Place says why, each
// sidecar's reason with the closest to a grant first, and not that no
// sidecar answered.
func TestPlaceSaysWhyEverySidecarDenied(t *testing.T) {
	t.Parallel()
	url, sidecarSeed, launcherSeed := externalNATS(t)
	alone := p99At(t, 10)
	slo := map[string]float64{"gpu-near": alone * 0.9, "gpu-far": alone * 0.3} // over even at min_pct: both deny
	for id, ms := range slo {
		cfg := testConfig(t, id, ms)
		cfg.NATS.URL, cfg.NATS.NKey = url, sidecarSeed
		start(t, cfg, Options{})
	}
	lc := launcherClient(t, url, launcherSeed)
	ctx := context.Background()
	if !eventually(ctx, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, _, _ := lc.Capacities(rctx)
		return len(got) == 2
	}) {
		t.Fatal("two summaries never came")
	}
	p, err := fleet.Place(ctx, lc, admitReq("job-denied", 10, 100), fleet.PlaceOptions{})
	if err == nil || p.Decision != nil {
		t.Fatalf("placed %+v, want every sidecar to deny", p)
	}
	msg := launch.Describe(err).Error()
	t.Log(msg)
	if !errors.Is(err, fleet.ErrEveryQuoteDenied) || errors.Is(err, v1.ErrNoSidecar) || !launch.NoOffer(err) {
		t.Errorf("error %v: want ErrEveryQuoteDenied (a no-offer), not ErrNoSidecar", err)
	}
	near, far := strings.Index(msg, "gpu-near: slo_violation: predicted"), strings.Index(msg, "gpu-far: slo_violation: predicted")
	if near < 0 || far < 0 || near > far || strings.Contains(msg, "is colocd serve running") {
		t.Errorf("message %q: want each sidecar's slo_violation, gpu-near (the closer) first, and no word of a sidecar not running", msg)
	}
}
