package bus

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/credfiles"
	"github.com/colocd/colocd/internal/syncio"
	"github.com/colocd/colocd/internal/wiretest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// tenants is an embedded server listening on loopback with two launcher
// identities, a and b.
type tenants struct {
	e            *natsserver.Embedded
	seedA, seedB string
	keyA, keyB   string
}

func twoTenants(t *testing.T, opts ...func(*natsserver.EmbeddedOptions)) *tenants {
	t.Helper()
	dir := t.TempDir()
	tt := &tenants{seedA: filepath.Join(dir, "a.nk"), seedB: filepath.Join(dir, "b.nk")}
	var err error
	if tt.keyA, err = credfiles.Ensure(tt.seedA); err != nil {
		t.Fatal(err)
	}
	if tt.keyB, err = credfiles.Ensure(tt.seedB); err != nil {
		t.Fatal(err)
	}
	o := natsserver.EmbeddedOptions{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), SidecarID: "gpu-a",
		Launchers: []natsserver.Launcher{{Name: "a", Key: tt.keyA}, {Name: "b", Key: tt.keyB}}}
	for _, f := range opts {
		f(&o)
	}
	if tt.e, err = natsserver.StartEmbedded(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tt.e.Shutdown)
	return tt
}

// dial connects as the launcher whose seed is seed, over TCP.
func (tt *tenants) dial(t *testing.T, seed string, extra ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := Connect(tt.e.ClientURL(), ConnectOptions{NKeySeedFile: seed, Options: append([]nats.Option{nats.MaxReconnects(0), nats.RetryOnFailedConnect(false)}, extra...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// tenantsOfStatus answers gpu-a's status on side, and sends the tenant of
// each request it answers.
func tenantsOfStatus(t *testing.T, side *nats.Conn) <-chan string {
	t.Helper()
	got := make(chan string, 4)
	sub, err := side.Subscribe(v1.EndpointSubject("gpu-a", v1.EndpointStatus), func(m *nats.Msg) {
		got <- Tenant(m.Header)
		_ = m.Respond([]byte("{}"))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := side.Flush(); err != nil {
		t.Fatal(err)
	}
	return got
}

// The server tells the sidecar who sent each request, and a launcher's own
// header of that name does not survive the crossing.
func TestTenantIsTheAuthenticatedLauncher(t *testing.T) {
	t.Parallel()
	tt := twoTenants(t)
	side := connect(t, tt.e)
	got := tenantsOfStatus(t, side)
	for _, c := range []struct {
		seed, want string
	}{{tt.seedA, tt.keyA}, {tt.seedB, tt.keyB}} {
		nc := tt.dial(t, c.seed)
		m := nats.NewMsg(v1.EndpointSubject("gpu-a", v1.EndpointStatus))
		m.Header.Set(RequestInfoHeader, `{"acc":"COLOCD_LAUNCHERS","user":"`+tt.keyA+`"}`) // b pretends to be a
		if _, err := nc.RequestMsg(m, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if g := <-got; g != c.want {
			t.Errorf("tenant %q, want %q", g, c.want)
		}
	}
	// The sidecar's own requests, in its account, carry no identity.
	if _, err := side.Request(v1.EndpointSubject("gpu-a", v1.EndpointStatus), nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != TenantLocal {
		t.Errorf("the sidecar's own request: tenant %q, want %q", g, TenantLocal)
	}
}

// A launcher subscribes below its own inbox only: another's replies (its
// lease ids, its watch consumers' names) are out of its reach.
func TestLaunchersCannotReadEachOthersReplies(t *testing.T) {
	t.Parallel()
	tt := twoTenants(t)
	var v violations
	a := tt.dial(t, tt.seedA, v.handler())
	for _, subj := range []string{"_INBOX.>", v1.LauncherInbox(tt.keyB) + ".>", "_INBOX.x"} {
		if _, err := a.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subj)
	}
	// Its own inbox works: a request to a sidecar is answered.
	serve(t, tt.e, "gpu-a", newFakeHandler())
	if _, err := NewClient(a).Status(testCtx(t), "gpu-a"); err != nil {
		t.Fatalf("status from launcher a: %v", err)
	}
}

// An identity that is removed while connected is disconnected, and cannot
// connect again; one that is added can.
func TestSetLaunchersAddsAndRemoves(t *testing.T) {
	t.Parallel()
	tt := twoTenants(t)
	closed := make(chan struct{})
	tt.dial(t, tt.seedB, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	dir := t.TempDir()
	seed, c, err := natsserver.AddLauncher(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := natsserver.AddLauncher(dir, "c"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("adding c twice: %v, want an error saying it exists", err)
	}
	listed, err := natsserver.ReadLaunchers(dir)
	if err != nil || len(listed) != 1 || listed[0] != c {
		t.Fatalf("ReadLaunchers = %v, %v; want [%v]", listed, err, c)
	}
	seedFile := filepath.Join(t.TempDir(), "c.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tt.e.SetLaunchers([]natsserver.Launcher{{Name: "a", Key: tt.keyA}, c}); err != nil {
		t.Fatal(err)
	}
	await(t, closed, "launcher b still connected 30 s after its removal")
	if connects(tt.e, tt.seedB) {
		t.Error("removed launcher b connected again")
	}
	tt.dial(t, seedFile) // c, added, connects
	if err := natsserver.RemoveLauncher(dir, "c"); err != nil {
		t.Fatal(err)
	}
	if err := natsserver.RemoveLauncher(dir, "c"); err == nil {
		t.Error("removing c twice: no error")
	}
}

// await returns what ch delivers, or fails t with failure after 30 s.
func await[T any](t *testing.T, ch <-chan T, failure string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
	}
	t.Fatal(failure)
	var zero T
	return zero
}

// One identity holds at most MaxLauncherConns connections; another is not
// held back by it.
func TestLauncherConnectionCap(t *testing.T) {
	t.Parallel()
	var logs syncio.Buffer
	tt := twoTenants(t, func(o *natsserver.EmbeddedOptions) {
		o.MaxLauncherConns = 3
		o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for range 3 {
		tt.dial(t, tt.seedA)
	}
	for range 3 {
		if connects(tt.e, tt.seedA) {
			t.Error("a fourth connection of launcher a was let in")
		}
	}
	tt.dial(t, tt.seedB)
	// Said once for the three refusals, with whose and why.
	if got := logs.String(); strings.Count(got, "launcher connection refused") != 1 || !strings.Contains(got, "max_connections (3)") {
		t.Errorf("log %q: want one line naming nats.launchers.max_connections (3)", got)
	}
}

// gate holds the handler calls that reach it until it is opened (close
// open), and counts them.
type gate struct {
	open    chan struct{}
	reached atomic.Int64
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

// pass waits until g is open (true) or ctx ends (false).
func (g *gate) pass(ctx context.Context) bool {
	g.reached.Add(1)
	select {
	case <-g.open:
		return true
	case <-ctx.Done():
		return false
	}
}

// gatedAdmits blocks every admit until the gate opens, and records the
// order the admits of each job ran in.
type gatedAdmits struct {
	*fakeHandler
	*gate
	mu    sync.Mutex
	order []string
}

func (g *gatedAdmits) Admit(ctx context.Context, req *v1.AdmitRequest) (*v1.Decision, error) {
	if !g.pass(ctx) {
		return nil, v1.Timeout("gate")
	}
	g.mu.Lock()
	g.order = append(g.order, req.Job.ID)
	g.mu.Unlock()
	return wiretest.Decision(), nil
}

// One launcher's backlog of admits delays another's by at most a turn:
// the queues are served round robin; past its share of the queue, a
// launcher gets a 503 with Retry-After at once.
func TestAdmitsAreServedFairly(t *testing.T) {
	t.Parallel()
	tt := twoTenants(t)
	g := &gatedAdmits{fakeHandler: newFakeHandler(), gate: newGate()}
	side := connect(t, tt.e)
	s, err := Serve(side, "gpu-a", "1.2.3", g, WithLimits(Limits{DecideWorkers: 1, TenantDecideQueue: 8}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	a, b := NewClient(tt.dial(t, tt.seedA)), NewClient(tt.dial(t, tt.seedB))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	admit := func(c *Client, job string) {
		defer wg.Done()
		req := wiretest.AdmitRequest()
		req.Job.ID = job
		_, err := c.Admit(ctx, "gpu-a", req)
		errs <- err
	}
	// a: one admit held by the only worker, then 8 queued (its share)...
	wg.Add(1)
	go admit(a, "a-0")
	for g.reached.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 8 {
		wg.Add(1)
		go admit(a, "a-"+string(rune('1'+i)))
	}
	waitQueued(t, s.decideQ, "", 8)
	// ...so its next is refused at once, with a Retry-After.
	req := wiretest.AdmitRequest()
	_, err = a.Admit(ctx, "gpu-a", req)
	var e *v1.Error
	if !errors.As(err, &e) || e.Code != v1.CodeUnavailable || e.RetryAfter <= 0 {
		t.Errorf("launcher a past its share: %v, want a 503 with Retry-After", err)
	}
	// b's admit, sent after a's eight, runs second.
	wg.Add(1)
	go admit(b, "b-0")
	waitQueued(t, s.decideQ, "", 9)
	close(g.open)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// a-0 held the worker; then a's oldest and b's took turns.
	g.mu.Lock()
	order := slices.Clone(g.order)
	g.mu.Unlock()
	if i := slices.Index(order, "b-0"); len(order) != 10 || i < 0 || i > 2 {
		t.Errorf("admits ran in order %v: want b-0 third at the latest", order)
	}
}

// waitQueued waits until q holds n requests.
func waitQueued(t *testing.T, q *fairQueue, _ string, n int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		q.mu.Lock()
		got := q.n
		q.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d requests queued after 30 s, want %d", got, n)
		}
	}
}

// A launcher past its rate gets a 429 with Retry-After; another launcher's
// requests are still answered.
func TestTenantRateLimit(t *testing.T) {
	t.Parallel()
	tt := twoTenants(t)
	side := connect(t, tt.e)
	s, err := Serve(side, "gpu-a", "1.2.3", newFakeHandler(), WithLimits(Limits{TenantRate: 0.001, TenantBurst: 3}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	a, b := NewClient(tt.dial(t, tt.seedA)), NewClient(tt.dial(t, tt.seedB))
	for i := range 3 {
		if _, err := a.Status(testCtx(t), "gpu-a"); err != nil {
			t.Fatalf("status %d of launcher a, within its burst: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = a.Status(ctx, "gpu-a")
	var e *v1.Error
	if !errors.As(err, &e) || e.Code != v1.CodeTooManyRequests || e.RetryAfter <= 0 || !strings.Contains(e.Description, "tenant_rate") {
		t.Errorf("launcher a past its burst: %v, want a 429 naming nats.limits.tenant_rate, with Retry-After", err)
	}
	// Within the second, its next excess request is dropped unanswered.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if _, err := a.Status(ctx2, "gpu-a"); v1.CodeOf(err) == v1.CodeTooManyRequests || err == nil {
		t.Errorf("launcher a's next excess request: %v, want no answer", err)
	}
	if _, err := b.Status(testCtx(t), "gpu-a"); err != nil {
		t.Errorf("launcher b, while a is refused: %v", err)
	}
}

// A request whose deadline passed while it waited for a worker is a 504
// without running: the deadline counts from its arrival.
func TestDeadlineCountsFromArrival(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	g := &gatedAdmits{fakeHandler: newFakeHandler(), gate: newGate()}
	s, err := Serve(connect(t, e), "gpu-a", "1.2.3", g, WithLimits(Limits{DecideWorkers: 1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	nc := connect(t, e)
	c := NewClient(nc)
	done := make(chan error, 1)
	go func() {
		req := wiretest.AdmitRequest()
		req.Job.ID = "first"
		_, err := c.Admit(testCtx(t), "gpu-a", req)
		done <- err
	}()
	for g.reached.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// The second, with 300 ms to live, waits behind the first past them.
	m := nats.NewMsg(v1.EndpointSubject("gpu-a", v1.EndpointAdmit))
	req := wiretest.AdmitRequest()
	req.Job.ID, req.RequestID, req.TokenSHA256 = "second", "r-second-0123456789abcdef", v1.TokenSHA256(v1.NewLeaseToken())
	data, err := json.Marshal(req)
	m.Data = data
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set(TimeoutHeader, "300")
	answer := make(chan *nats.Msg, 1)
	go func() {
		r, err := nc.RequestMsg(m, time.Minute)
		if err != nil {
			t.Error(err)
		}
		answer <- r
	}()
	waitQueued(t, s.decideQ, "", 1)
	time.Sleep(400 * time.Millisecond) // the 300 ms are spent, however busy the machine
	close(g.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r := <-answer
	if r == nil {
		return
	}
	if e := responseError(r); e == nil || e.Code != v1.CodeTimeout {
		t.Errorf("the second admit: %v, want a 504", e)
	}
	if n := g.reached.Load(); n != 1 {
		t.Errorf("the handler ran %d admits, want 1: the second's deadline passed in the queue", n)
	}
}

func TestFairQueueRoundRobin(t *testing.T) {
	t.Parallel()
	q := &fairQueue{tenants: map[string]*tenantQueue{}, max: 100, perTenant: 10, maxRunning: 100}
	q.cond = sync.NewCond(&q.mu)
	var order []string
	push := func(tenant string, n int) {
		for range n {
			if _, err := q.push(tenant, job{run: func() { order = append(order, tenant) }}); err != nil {
				t.Fatal(err)
			}
		}
	}
	push("a", 4)
	push("b", 2)
	push("c", 1)
	for range 7 {
		job, done, ok := q.pop()
		if !ok {
			t.Fatal("queue closed early")
		}
		job()
		done()
	}
	if got := strings.Join(order, ""); got != "abcabaa" {
		t.Errorf("order %q, want abcabaa", got)
	}
	push("a", 10)
	if _, err := q.push("a", job{run: func() {}}); !errors.Is(err, errQueueFull) {
		t.Errorf("push past a tenant's share: %v, want errQueueFull", err)
	}
}

// A tenant holds at most all workers but one: with its requests running
// there, another tenant's request is taken next even though the first
// has more waiting.
func TestFairQueueLeavesAWorkerForOthers(t *testing.T) {
	t.Parallel()
	q := &fairQueue{tenants: map[string]*tenantQueue{}, max: 100, perTenant: 10, maxRunning: tenantWorkers(2)}
	q.cond = sync.NewCond(&q.mu)
	var ran []string
	for _, tenant := range []string{"slow", "slow", "slow", "honest"} {
		if _, err := q.push(tenant, job{run: func() { ran = append(ran, tenant) }}); err != nil {
			t.Fatal(err)
		}
	}
	job, doneSlow, _ := q.pop() // a slow request holds a worker, and runs on
	job()
	job, done, _ := q.pop()
	job()
	done()
	doneSlow()
	if want := []string{"slow", "honest"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v: the second worker is left for honest", ran, want)
	}
}

func TestTenantOfHeader(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ header, want string }{
		{"", TenantLocal},
		{`{"acc":"COLOCD_LAUNCHERS","user":"UABC"}`, "UABC"},
		{`{"acc":"TEAM"}`, "account:TEAM"},
		{`{}`, TenantUnknown},
		{`not json`, TenantUnknown},
		{`{"user":"` + strings.Repeat("x", 300) + `"}`, TenantUnknown},
	} {
		h := nats.Header{}
		if c.header != "" {
			h.Set(RequestInfoHeader, c.header)
		}
		if got := Tenant(h); got != c.want {
			t.Errorf("Tenant(%q) = %q, want %q", c.header, got, c.want)
		}
	}
}

// On the embedded server and on one configured as documented, a launcher's
// request reaches the sidecar with the launcher's own key as its tenant.
func TestBothServersTellTheTenant(t *testing.T) {
	t.Parallel()
	for _, setup := range launcherSetups {
		t.Run(setup.name, func(t *testing.T) {
			t.Parallel()
			side, launcher := setup.dial(t)
			got := tenantsOfStatus(t, side)
			if _, err := launcher.Request(v1.EndpointSubject("gpu-a", v1.EndpointStatus), nil, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if g := <-got; !nkeys.IsValidPublicUserKey(g) {
				t.Errorf("tenant %q, want the launcher's public NKey", g)
			}
		})
	}
}

// One launcher's watches delete only its own consumers: another's is
// still there after the first made more than the sidecar keeps.
func TestWatchesOfOneLauncherLeaveAnothersAlone(t *testing.T) {
	t.Parallel()
	tt := twoTenants(t)
	openEvents(t, tt.e, "gpu-a")
	ctx := testCtx(t)
	a, b := NewClient(tt.dial(t, tt.seedA)), NewClient(tt.dial(t, tt.seedB))
	var mine v1.WatchReply
	if err := b.call(ctx, "gpu-a", v1.EndpointWatch, &v1.WatchRequest{}, &mine); err != nil {
		t.Fatal(err)
	}
	const flood = MaxWatchConsumers + 40
	for i := range flood {
		// Each watch gets its own deadline: what is checked is that every
		// one is answered, not how fast a thousand are on a busy machine.
		var r v1.WatchReply
		if err := a.call(testCtx(t), "gpu-a", v1.EndpointWatch, &v1.WatchRequest{}, &r); err != nil {
			t.Fatalf("watch %d of launcher a: %v", i, err)
		}
	}
	// The checks get a deadline of their own: the flood may have used
	// up the first one on a busy machine.
	ctx = testCtx(t)
	js, err := jetstream.New(connect(t, tt.e))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Consumer(ctx, mine.Stream, mine.Consumer); err != nil {
		t.Errorf("launcher b's consumer, after launcher a's %d watches: %v", flood, err)
	}
	st, err := js.Stream(ctx, mine.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, share := info.State.Consumers, DefaultLimits().TenantWatches; n > share+1 {
		t.Errorf("%d consumers after a's %d watches and b's one, want at most a's share %d and b's", n, flood, share)
	}
	// b can still watch.
	if err := b.call(ctx, "gpu-a", v1.EndpointWatch, &v1.WatchRequest{}, &mine); err != nil {
		t.Errorf("launcher b's next watch: %v", err)
	}
}

// The embedded server keeps the way back of a lease call open 15 s, of a
// decision the server's default 2 minutes.
func TestResponseThresholds(t *testing.T) {
	t.Parallel()
	sidecars, _, err := natsserver.Accounts("gpu-a")
	if err != nil {
		t.Fatal(err)
	}
	for subject, want := range map[string]time.Duration{
		v1.EndpointSubject("*", v1.EndpointRenew): v1.ResponseThreshold,
		v1.FleetSubject: v1.ResponseThreshold,
		v1.EndpointSubject("*", v1.EndpointAdmit): 2 * time.Minute,
	} {
		if got, err := sidecars.ServiceExportResponseThreshold(subject); err != nil || got != want {
			t.Errorf("%s: %v (%v), want %v", subject, got, err, want)
		}
	}
}

// A launcher that floods past its rate without reading the answers is
// reported once, with the connection it floods from; shunned, that
// connection is closed and the identity cannot connect again, while
// another launcher is served all along.
func TestFloodIsReportedAndShunned(t *testing.T) {
	t.Parallel()
	tt := twoTenants(t)
	side := connect(t, tt.e)
	type flood struct {
		tenant string
		conn   uint64
	}
	reported := make(chan flood, 4)
	s, err := Serve(side, "gpu-a", "1.2.3", newFakeHandler(), WithLimits(Limits{TenantRate: 0.001, TenantBurst: 1}),
		WithFloodHandler(func(tenant, info string) {
			reported <- flood{tenant, RequestConn(info)}
			tt.e.Shun(tenant, RequestConn(info), time.Minute)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	disconnected := make(chan struct{}, 1)
	a := tt.dial(t, tt.seedA, nats.DisconnectErrHandler(func(*nats.Conn, error) {
		select {
		case disconnected <- struct{}{}:
		default:
		}
	}))
	b := NewClient(tt.dial(t, tt.seedB))
	for range 1000 {
		if err := a.PublishRequest(v1.EndpointSubject("gpu-a", v1.EndpointStatus), a.NewRespInbox(), nil); err != nil {
			break // closed under it
		}
	}
	_ = a.Flush()
	if f := await(t, reported, "no flood reported 30 s after 1,000 requests past the rate"); f.tenant != tt.keyA || f.conn == 0 {
		t.Errorf("flood reported from %+v, want launcher a's key and its connection", f)
	}
	await(t, disconnected, "the flooding connection was not closed")
	if connects(tt.e, tt.seedA) {
		t.Error("the shunned launcher connected again")
	}
	if _, err := b.Status(testCtx(t), "gpu-a"); err != nil {
		t.Errorf("launcher b during a's flood: %v", err)
	}
}

// Closing refuses what is queued, without running it.
func TestFairQueueCloseRefusesQueued(t *testing.T) {
	t.Parallel()
	q := newFairQueue(1, 10, 10)
	hold, held := make(chan struct{}), make(chan struct{})
	var ran, refused atomic.Int64
	if _, err := q.push("a", job{run: func() { close(held); <-hold }, refuse: func() { refused.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	<-held
	for range 3 {
		if _, err := q.push("a", job{run: func() { ran.Add(1) }, refuse: func() { refused.Add(1) }}); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan struct{})
	go func() { q.close(); close(closed) }()
	for refused.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	<-closed
	if ran.Load() != 0 || refused.Load() != 3 {
		t.Errorf("after close: %d ran, %d refused; want 0 and 3", ran.Load(), refused.Load())
	}
	if _, err := q.push("a", job{run: func() {}, refuse: func() {}}); !errors.Is(err, errQueueClosed) {
		t.Errorf("push after close: %v, want errQueueClosed", err)
	}
}

// connects reports whether a launcher with the seed file seed gets a
// connection to e now; one it gets is closed at once.
func connects(e *natsserver.Embedded, seed string) bool {
	nc, err := Connect(e.ClientURL(), ConnectOptions{NKeySeedFile: seed, Options: []nats.Option{nats.RetryOnFailedConnect(false)}})
	if err != nil {
		return false
	}
	nc.Close()
	return true
}

// A connection that stays connected (colocd run's, the sidecar's) keeps
// reconnecting through refusals: an identity refused a while (removed and
// added back, over its cap, shunned) is back once it is let in, where
// nats.go alone would close the connection for good at the second refusal.
func TestStayConnectedOutlastsRefusals(t *testing.T) {
	t.Parallel()
	tt := twoTenants(t)
	var refusals atomic.Int64
	back := make(chan struct{}, 1)
	nc, err := Connect(tt.e.ClientURL(), ConnectOptions{NKeySeedFile: tt.seedB, Policy: StayConnected, Options: []nats.Option{
		nats.ReconnectWait(20 * time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrAuthorization) {
				refusals.Add(1)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { back <- struct{}{} }),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if err := tt.e.SetLaunchers([]natsserver.Launcher{{Name: "a", Key: tt.keyA}}); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(time.Minute); refusals.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) || nc.IsClosed() {
			t.Fatalf("%d refusals in a minute, closed: %v", refusals.Load(), nc.IsClosed())
		}
	}
	if err := tt.e.SetLaunchers([]natsserver.Launcher{{Name: "a", Key: tt.keyA}, {Name: "b", Key: tt.keyB}}); err != nil {
		t.Fatal(err)
	}
	await(t, back, "launcher b not back 30 s after it was let in again")
	if err := nc.Flush(); err != nil {
		t.Errorf("flush after the reconnect: %v", err)
	}
}
