package sidecar

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/natstest"
)

// natsCluster runs n real nats-servers on loopback as one JetStream
// cluster, with the permission set users are told to deploy; it returns
// the servers and the seed files of the sidecar and launcher users.
func natsCluster(t testing.TB, n int) (nodes []*server.Server, sidecarSeed, launcherSeed string) {
	t.Helper()
	dir := t.TempDir()
	sidecarSeed, launcherSeed = natstest.Users(t, dir)
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		opts := natstest.Documented(t, "../deploy/nats/colocd-auth.conf", filepath.Join(dir, name))
		opts.ServerName = name
		opts.Cluster = server.ClusterOpts{Name: "colocd", Host: "127.0.0.1", Port: ports[i]}
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		nodes = append(nodes, natstest.Start(t, opts))
	}
	return nodes, sidecarSeed, launcherSeed
}

// clusterURL lists the nodes' client URLs.
func clusterURL(nodes []*server.Server) string {
	var urls []string
	for _, ns := range nodes {
		urls = append(urls, ns.ClientURL())
	}
	return strings.Join(urls, ",")
}

// Sidecars as clients of a three-node JetStream cluster, with three
// replicas of every bucket and stream: a lease lives on all three nodes;
// with one node killed the lease renews, a new job is admitted and placed,
// and nothing is lost.
func TestThreeNodeCluster(t *testing.T) {
	nodes, sidecarSeed, launcherSeed := natsCluster(t, 3)
	url := clusterURL(nodes)
	var sidecars []*running
	ctx := context.Background()
	for _, id := range []string{"gpu-a", "gpu-b"} {
		cfg := testConfig(t, id, 10000)
		cfg.NATS.URL, cfg.NATS.NKey, cfg.NATS.Replicas = url, sidecarSeed, 3
		var s *running
		// The cluster elects its JetStream leader after it starts.
		if !eventually(ctx, func() bool {
			sc, err := New(ctx, cfg, Options{})
			if err != nil {
				return false
			}
			sc.Close(ctx)
			return true
		}) {
			t.Fatal("the cluster's JetStream never came up")
		}
		s = start(t, cfg, Options{})
		sidecars = append(sidecars, s)
	}
	lc := launcherClient(t, url, launcherSeed)
	d, err := lc.Admit(ctx, "gpu-a", admitReq("job-1", 10, 100))
	if err != nil || d.Lease == nil {
		t.Fatalf("admit: %v %+v", err, d)
	}
	snc, err := bus.Connect(url, bus.ConnectOptions{Name: "inspect", NKeySeedFile: sidecarSeed,
		Options: []nats.Option{nats.CustomInboxPrefix(bus.SidecarInboxPrefix("inspect"))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snc.Close)
	js, err := jetstream.New(snc)
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"KV_" + bus.LeaseBucketName("gpu-a"), bus.EventStreamName("gpu-a"), "KV_" + bus.CapacityBucket} {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		info, err := st.Info(ctx)
		if err != nil || info.Config.Replicas != 3 {
			t.Errorf("stream %s: %v, replicas %d, want 3", stream, err, info.Config.Replicas)
		}
	}
	// Kill one node: the others keep the quorum.
	nodes[2].Shutdown()
	ref := &bus.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}
	// A stream whose leader was on the node elects another within
	// seconds; until then a write is a 503, and the client retries.
	wctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	var renewErr error
	if !eventually(wctx, func() bool {
		rctx, cancel := context.WithTimeout(wctx, 5*time.Second)
		defer cancel()
		_, renewErr = lc.Renew(rctx, "gpu-a", ref)
		if renewErr != nil {
			t.Logf("renew with a node down: %v", renewErr)
		}
		return renewErr == nil
	}) {
		t.Fatalf("renew with a node down: %v", renewErr)
	}
	var p *bus.Placement
	if !eventually(wctx, func() bool {
		rctx, cancel := context.WithTimeout(wctx, 5*time.Second)
		defer cancel()
		p, err = lc.Place(rctx, admitReq("job-2", 10, 100), bus.PlaceOptions{})
		if err != nil {
			t.Logf("place with a node down: %v", err)
		}
		return err == nil
	}) {
		t.Fatalf("place with a node down: %v %+v", err, p)
	}
	leases := 0
	for _, s := range sidecars {
		st, err := lc.Status(ctx, s.ID())
		if err != nil {
			t.Fatal(err)
		}
		leases += len(st.Leases)
	}
	if leases != 2 {
		t.Errorf("%d leases across the fleet, want 2 (job-1 and job-2)", leases)
	}
}
