package sidecar

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"golang.org/x/sync/errgroup"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/fleet"
)

// bertProfile is the second kind of inference service of the fleet.
const bertProfile = "../testdata/profiles/summary-bert.json"

// fleetStartConcurrency is how many sidecars start at once.
const fleetStartConcurrency = 8

// BenchmarkFleet places a stream of training jobs on a fleet of simulated
// sidecars that are clients of a real three-node nats-server cluster on
// loopback, each with one of two inference services at its own SLO (so
// that they differ in what they can take), and compares each placement with
// an oracle that quotes every sidecar. Midway one node is killed. Each
// iteration places one job with colocd place's call and releases it, so
// the fleet stays as it started. COLOCD_FLEET lists the fleet sizes
// (default 10; make fleet runs 10,100,1000).
func BenchmarkFleet(b *testing.B) {
	sizes := []int{10}
	if v := os.Getenv("COLOCD_FLEET"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("COLOCD_FLEET: want sizes such as 10,100, got %q", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("sidecars=%d", n), func(b *testing.B) { benchFleet(b, n) })
	}
}

func benchFleet(b *testing.B, n int) {
	nodes, sidecarSeed, launcherSeed := natsCluster(b, 3)
	url := clusterURL(nodes)
	ctx := context.Background()
	// Two kinds of inference service, every other GPU: the example one at
	// 8 requests/s, and a BERT-like one at 40. base is a service's p99 next
	// to a trainer at 100 %.
	kinds := []configs.Service{
		{Name: "v100-infer", Profile: serviceProfile, RateRPS: 8},
		{Name: "bert", Profile: bertProfile, RateRPS: 40},
	}
	base := make([]float64, len(kinds))
	for k, svc := range kinds {
		base[k] = p99Of(b, svc.Profile, svc.RateRPS, 100)
	}
	ids := make([]string, n)
	cfgs := make([]*configs.Config, n)
	for i := range n {
		ids[i] = fmt.Sprintf("gpu-%04d", i)
		k := i % len(kinds)
		cfg := testConfig(b, ids[i], 0)
		// SLOs from "nothing fits" to "anything fits": quotes differ.
		cfg.Services = []configs.Service{kinds[k]}
		cfg.Services[0].SLO.P99MS = base[k] * (0.6 + 0.1*float64(i/len(kinds)%10))
		// Three replicas: a node killed loses no stream.
		cfg.NATS.URL, cfg.NATS.NKey, cfg.NATS.Replicas = url, sidecarSeed, 3
		cfg.Fleet.Heartbeat, cfg.Fleet.TTL = 5*time.Second, 30*time.Second
		cfgs[i] = cfg
	}
	if !eventually(ctx, func() bool { // the cluster elects its JetStream leader first
		s, err := New(ctx, cfgs[0], Options{})
		if err == nil {
			s.Close(ctx)
		}
		return err == nil
	}) {
		b.Fatal("the cluster's JetStream never came up")
	}
	// The sidecars start a few at a time: each creates its lease bucket and
	// event stream through the cluster's meta leader, which is the wait.
	t0 := time.Now()
	var g errgroup.Group
	g.SetLimit(fleetStartConcurrency)
	var mu sync.Mutex
	for _, cfg := range cfgs {
		g.Go(func() error {
			s, err := New(ctx, cfg, Options{})
			if err != nil {
				return fmt.Errorf("sidecar %s: %w", cfg.Sidecar.ID, err)
			}
			mu.Lock()
			defer mu.Unlock()
			runSidecar(b, s)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	startup := time.Since(t0)
	lc := launcherClient(b, url, launcherSeed)
	if !eventually(ctx, func() bool { caps, _, err := lc.Capacities(ctx); return err == nil && len(caps) == n }) {
		b.Fatalf("the %d summaries never all came", n)
	}
	var (
		lat      []float64
		reads    []float64
		requests int
		agree    int
		placed   int
		failed   int
		killed   = -1 // the first placement after the kill
		// releaseRetries counts the 503s and 504s of releases (outside the timing)
		releaseRetries int
	)
	b.ResetTimer()
	for i := range b.N {
		if i == b.N/2 && b.N > 1 {
			nodes[2].Shutdown() // the others keep the cluster
			killed = i
		}
		req := admitReq(fmt.Sprintf("job-%d", i), 10, 100)
		t0 := time.Now()
		p, err := fleet.Place(ctx, lc, req, fleet.PlaceOptions{})
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		if p != nil {
			requests += p.Requests
		}
		if err != nil || p.Decision == nil {
			if failed < 3 {
				b.Logf("placement %d: %v (%+v)", i, err, p)
			}
			failed++
			continue
		}
		placed++
		b.StopTimer()
		// What the read of every summary costs alone: the part of a
		// placement that grows with the fleet.
		r0 := time.Now()
		if _, _, err := lc.Capacities(ctx); err == nil {
			reads = append(reads, float64(time.Since(r0).Microseconds())/1000)
		}
		// The oracle: every sidecar's quote, best by the same policy.
		qs, _ := lc.QuoteExpect(ctx, admitReq(fmt.Sprintf("oracle-%d", i), 10, 100), 10*time.Second, ids)
		best := 0
		for _, q := range qs {
			if q.Decision != v1.DecisionDeny {
				best = max(best, q.ActiveThreadPct)
			}
		}
		if p.Decision.ActiveThreadPct >= best {
			agree++
		}
		// Just after the kill a stream whose leader was on the node is a
		// 503 until it elects another, and a loaded cluster's write can
		// outlast the sidecar's deadline (504): release retries, as a
		// launcher does (a release is idempotent).
		ref := &v1.LeaseRef{LeaseID: p.Decision.Lease.ID, Token: p.Decision.Lease.Token}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		r0 = time.Now()
		retry := func(err error) bool {
			return (v1.CodeOf(err) == v1.CodeUnavailable || v1.CodeOf(err) == v1.CodeTimeout) && rctx.Err() == nil
		}
		for err = lc.Release(rctx, p.Sidecar, ref); retry(err); err = lc.Release(rctx, p.Sidecar, ref) {
			releaseRetries++
			time.Sleep(200 * time.Millisecond)
		}
		cancel()
		if err != nil {
			b.Errorf("release on %s: %v", p.Sidecar, err)
		}
		if d := time.Since(r0); d > time.Second {
			b.Logf("placement %d: release on %s took %s (%d retries so far)", i, p.Sidecar, d.Round(time.Millisecond), releaseRetries)
		}
		b.StartTimer()
	}
	b.StopTimer()
	afterKill := 0.0
	if killed >= 0 {
		afterKill = slices.Max(lat[killed:])
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(q(0.5), "p50-ms")
	if len(reads) > 0 {
		slices.Sort(reads)
		b.ReportMetric(reads[len(reads)/2], "read-p50-ms")
	}
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(requests)/float64(b.N), "requests/placement")
	b.ReportMetric(float64(n+1), "oracle-requests/placement")
	b.ReportMetric(float64(agree)/float64(max(placed, 1)), "as-good-as-oracle")
	b.ReportMetric(float64(failed), "failed-placements")
	b.ReportMetric(afterKill, "max-ms-after-kill")
	b.ReportMetric(startup.Seconds(), "fleet-start-s")
	b.ReportMetric(float64(releaseRetries), "release-retries")
}
