package sidecar

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/fleet"
	"github.com/colocd/colocd/internal/natstest"
)

// natsCluster runs n real nats-servers on loopback as one JetStream
// cluster, with the permission set users are told to deploy; it returns
// the servers and the seed files of the sidecar and launcher users.
func natsCluster(t testing.TB, n int) (nodes []*server.Server, sidecarSeed, launcherSeed string) {
	t.Helper()
	dir := t.TempDir()
	sidecarSeed, launcherSeed, vars := natstest.Seeds(t, dir)
	ports := make([]int, n)
	for i := range ports {
		ports[i] = natstest.FreePort(t)
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		opts := natstest.DocumentedWith(t, "../deploy/nats/colocd-auth.conf", filepath.Join(dir, name), vars)
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
// replicas of every bucket and stream (gpu-a asks for them, gpu-b's
// nats.replicas is left at 0, which chooses 3 on a cluster of three): a
// lease lives on all three nodes;
// with one node killed the lease renews, a new job is admitted and placed,
// and nothing is lost.
func TestThreeNodeCluster(t *testing.T) {
	t.Parallel()
	nodes, sidecarSeed, launcherSeed := natsCluster(t, 3)
	url := clusterURL(nodes)
	var sidecars []*running
	ctx := context.Background()
	for _, id := range []string{"gpu-a", "gpu-b"} {
		cfg := testConfig(t, id, 10000)
		cfg.NATS.URL, cfg.NATS.NKey = url, sidecarSeed
		if id == "gpu-a" {
			cfg.NATS.Replicas = 3
		}
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
	d := leased(ctx, t, lc, "gpu-a", admitReq("job-1", 10, 100))
	snc, err := bus.Connect(url, bus.ConnectOptions{Name: "inspect", NKeySeedFile: sidecarSeed,
		Options: []nats.Option{nats.CustomInboxPrefix(v1.SidecarInboxPrefix("inspect"))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snc.Close)
	js, err := jetstream.New(snc)
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"KV_" + v1.LeaseBucketName("gpu-a"), v1.EventStreamName("gpu-a"), "KV_" + fleet.CapacityBucket,
		"KV_" + v1.LeaseBucketName("gpu-b"), v1.EventStreamName("gpu-b")} {
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
	ref := &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}
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
	var p *fleet.Placement
	if !eventually(wctx, func() bool {
		rctx, cancel := context.WithTimeout(wctx, 5*time.Second)
		defer cancel()
		p, err = fleet.Place(rctx, lc, admitReq("job-2", 10, 100), fleet.PlaceOptions{})
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

// hub is a nats-server with the documented accounts, JetStream domain
// "hub" and a leafnode listener, which can be stopped and started again on
// the same ports and store.
type hub struct {
	t                         *testing.T
	dir                       string
	port, leafPort            int
	sidecarSeed, launcherSeed string
	vars                      map[string]string
	ns                        *server.Server
}

func startHub(t *testing.T) *hub {
	t.Helper()
	h := &hub{t: t, dir: t.TempDir(), port: natstest.FreePort(t), leafPort: natstest.FreePort(t)}
	h.sidecarSeed, h.launcherSeed, h.vars = natstest.Seeds(t, h.dir)
	h.start()
	return h
}

func (h *hub) start() {
	opts := natstest.DocumentedWith(h.t, "../deploy/nats/colocd-auth.conf", filepath.Join(h.dir, "js"), h.vars)
	opts.Port, opts.JetStreamDomain = h.port, natsserver.DefaultHubDomain
	opts.LeafNode.Host, opts.LeafNode.Port = "127.0.0.1", h.leafPort
	h.ns = natstest.Start(h.t, opts)
}

func (h *hub) stop() {
	h.ns.Shutdown()
	h.ns.WaitForShutdown()
}

func (h *hub) leafURL() string { return "nats-leaf://127.0.0.1:" + strconv.Itoa(h.leafPort) }

// A GPU host whose embedded server is a leaf node of a hub: the hub's
// launchers find it in the fleet's summaries, quote, admit and read its
// events across the leaf connection; its leases stay on the host; while
// the hub is down a local launcher still admits there; when the hub is
// back the summary catches up and the hub's launcher sees both jobs.
func TestLeafNode(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	cfg := testConfig(t, "gpu-leaf", 10000)
	cfg.NATS.Leaf = configs.Leaf{URL: h.leafURL(), NKey: h.sidecarSeed, HubDomain: natsserver.DefaultHubDomain, HubReplicas: 1}
	cfg.Fleet.Heartbeat, cfg.Fleet.TTL = time.Second, 30*time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := start(t, cfg, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	hubURL := h.ns.ClientURL()
	remote := launcherClient(t, hubURL, h.launcherSeed)
	leases := func(c *bus.Client) int {
		caps, _, err := c.Capacities(ctx)
		if err != nil || len(caps) != 1 || caps[0].Sidecar != "gpu-leaf" {
			return -1
		}
		return caps[0].Leases
	}
	if !eventually(ctx, func() bool { return leases(remote) == 0 }) {
		t.Fatal("the leaf host's summary never reached the hub")
	}
	req := admitReq("job-hub", 10, 100)
	req.LeaseSeconds = 1 // it expires: an event on the host's stream
	p, err := fleet.Place(ctx, remote, req, fleet.PlaceOptions{})
	if err != nil || p.Decision == nil || p.Decision.Lease == nil || p.Sidecar != "gpu-leaf" {
		t.Fatalf("place from the hub: %v %+v", err, p)
	}
	expired(ctx, t, remote, "job-hub")
	// The leases are the host's own: the hub holds no lease bucket.
	snc, err := bus.Connect(hubURL, bus.ConnectOptions{Name: "inspect", NKeySeedFile: h.sidecarSeed,
		Options: []nats.Option{nats.CustomInboxPrefix(v1.SidecarInboxPrefix("inspect"))}})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(snc)
	if err != nil {
		t.Fatal(err)
	}
	var streams []string
	for name := range js.StreamNames(ctx).Name() {
		streams = append(streams, name)
	}
	if want := []string{"KV_" + fleet.CapacityBucket}; !slices.Equal(streams, want) {
		t.Errorf("the hub's streams: %v, want only %v", streams, want)
	}
	snc.Close()

	// The hub goes down: the host admits on its own, and its events are
	// kept for the hub.
	h.stop()
	local := launcherClient(t, s.embed.ClientURL(), cfg.LauncherNKeyFile())
	for _, job := range []string{"job-local", "job-gone"} {
		req := admitReq(job, 10, 50)
		if job == "job-gone" {
			req.LeaseSeconds = 1
		}
		if d, err := local.Admit(ctx, "gpu-leaf", req); err != nil || d.Lease == nil {
			t.Fatalf("admit %s on the host with the hub down: %v %+v", job, err, d)
		}
	}
	expired(ctx, t, local, "job-gone")

	// The hub is back: the summary catches up, and the hub's launcher
	// reads the events of the time it was away.
	h.start()
	remote = launcherClient(t, h.ns.ClientURL(), h.launcherSeed)
	if !eventually(ctx, func() bool { return leases(remote) == 1 }) {
		t.Fatalf("the summary did not catch up after the hub came back: %d leases, want 1", leases(remote))
	}
	expired(ctx, t, remote, "job-gone")
}

// expired waits for job's expire event on gpu-leaf's stream, read by c.
func expired(ctx context.Context, t *testing.T, c *bus.Client, job string) {
	t.Helper()
	var (
		sub *bus.EventSubscription
		err error
	)
	// Right after the hub starts, the leaf connection may not be back yet.
	if !eventually(ctx, func() bool { sub, err = c.Events(ctx, "gpu-leaf", job, 0); return err == nil }) {
		t.Fatalf("%s: events: %v", job, err)
	}
	defer sub.Stop()
	select {
	case rec, ok := <-sub.C():
		if !ok || rec.Event.Type != v1.EventExpire || rec.Event.JobID != job {
			t.Fatalf("%s: event %+v, %v (%v), want its expiry", job, rec.Event, ok, sub.Err())
		}
	case <-ctx.Done():
		t.Fatalf("%s: no expire event", job)
	}
}
