package bus

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/credfiles"
	"github.com/colocd/colocd/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// authServer is an embedded server listening on loopback with one
// launcher key, and the path of that key's seed.
func authServer(t *testing.T) (*natsserver.Embedded, string) {
	t.Helper()
	seed := filepath.Join(t.TempDir(), "launcher.nk")
	pub, err := credfiles.Ensure(seed)
	if err != nil {
		t.Fatal(err)
	}
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), SidecarID: "gpu-a", Launchers: []natsserver.Launcher{{Name: "test", Key: pub}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e, seed
}

// violations collects a connection's permission errors.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.errs = append(v.errs, err.Error())
	})
}

// launcherConn connects to e as a launcher with the seed file seed; what
// the server refuses it lands in the returned violations.
func launcherConn(t *testing.T, e *natsserver.Embedded, seed string) (*nats.Conn, *violations) {
	t.Helper()
	v := &violations{}
	nc, err := Connect(e.ClientURL(), ConnectOptions{Name: "launcher", NKeySeedFile: seed, Options: []nats.Option{v.handler()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, v
}

// waitFor waits until an error mentioning subject arrived.
func (v *violations) waitFor(t *testing.T, subject string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		v.mu.Lock()
		for _, e := range v.errs {
			if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, subject) {
				v.mu.Unlock()
				return
			}
		}
		v.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("no permissions violation for %q; errors: %v", subject, v.errs)
}

func TestAnonymousClientsAreRefused(t *testing.T) {
	t.Parallel()
	e, _ := authServer(t)
	nc, err := nats.Connect(e.ClientURL(), nats.MaxReconnects(0))
	if err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected")
	}
	if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("anonymous connect: %v, want an authorization error", err)
	}
	other := filepath.Join(t.TempDir(), "other.nk")
	if _, err := credfiles.Ensure(other); err != nil {
		t.Fatal(err)
	}
	if nc, err := Connect(e.ClientURL(), ConnectOptions{NKeySeedFile: other, Options: []nats.Option{nats.RetryOnFailedConnect(false), nats.MaxReconnects(0)}}); err == nil {
		nc.Close()
		t.Error("an unknown nkey connected")
	}
}

// TestLauncherCanOnlyAsk: a launcher reaches the API and its events, and
// nothing else: it cannot answer in the sidecar's name, read the sidecar's
// traffic, or touch the lease bucket and the events stream.
func TestLauncherCanOnlyAsk(t *testing.T) {
	t.Parallel()
	e, seed := authServer(t)
	h := newFakeHandler()
	serve(t, e, "gpu-a", h)
	side := connect(t, e)
	ctx := testCtx(t)
	kv, js := leaseBucket(t, ctx, side, `{"secret":1}`)
	events, err := OpenEvents(ctx, js, "gpu-a", 0, 1)
	if err != nil {
		t.Fatal(err)
	}

	nc, v := launcherConn(t, e, seed)
	c := NewClient(nc, WithTimeout(5*time.Second))

	// Allowed: the API, discovery, and the job's events.
	if _, err := c.Status(ctx, "gpu-a"); err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, subject := range []string{"$SRV.PING.colocd", "$SRV.INFO.colocd"} {
		if _, err := nc.Request(subject, nil, 5*time.Second); err != nil {
			t.Errorf("%s: %v", subject, err)
		}
	}
	mustPublish(t, ctx, events, v1.Event{Type: v1.EventRevoke, LeaseID: "l1", JobID: "job-1", Reason: "real"})
	sub, err := c.Events(ctx, "gpu-a", "job-1", 0)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	select {
	case rec := <-sub.C():
		if rec.Event.Reason != "real" {
			t.Errorf("event %+v", rec.Event)
		}
	case <-ctx.Done():
		t.Errorf("no event: %v", sub.Err())
	}
	_ = sub.Stop()

	// Refused: impersonating the service, sniffing, the store, the stream.
	for _, subject := range []string{"colocd.v1.gpu-a.admit", "colocd.v1.>", ">", v1.SidecarInboxPrefix("gpu-a") + ".>", "$KV.>"} {
		if _, err := nc.QueueSubscribe(subject, "q", func(m *nats.Msg) { _ = m.Respond([]byte(`{"decision":"grant"}`)) }); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subject)
	}
	for _, subject := range []string{"colocd.v1.gpu-a.events.job-1", "$KV." + v1.LeaseBucketName("gpu-a") + ".lease-1",
		"$JS.API.STREAM.DELETE." + v1.EventStreamName("gpu-a"), "$JS.API.STREAM.INFO.KV_" + v1.LeaseBucketName("gpu-a"), "_INBOX.someone-else",
		// Others' traffic, counted per endpoint.
		"$SRV.STATS.colocd"} {
		if err := nc.Publish(subject, []byte(`{"type":"revoke","lease_id":"l1","job_id":"job-1","reason":"forged"}`)); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subject)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ljs, _ := jetstream.New(nc)
	if _, err := ljs.KeyValue(short, v1.LeaseBucketName("gpu-a")); err == nil {
		t.Error("a launcher opened the lease bucket")
	}
	// Nothing changed: the sidecar still answers, the stream holds one
	// event and the lease is intact.
	for i := range 10 {
		if _, err := c.Status(ctx, "gpu-a"); err != nil {
			t.Fatalf("status %d after the probes: %v", i, err)
		}
	}
	info, err := js.Stream(ctx, v1.EventStreamName("gpu-a"))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("events stream holds %d messages, want 1", n)
	}
	if v, _, err := kv.Get(ctx, "lease-1"); err != nil || string(v) != `{"secret":1}` {
		t.Errorf("lease record %q, %v", v, err)
	}
}

// documentedServer runs a nats-server with deploy/nats/colocd-auth.conf
// (JetStream on, loopback) and returns it with the seed files of its
// sidecar and launcher users.
func documentedServer(t *testing.T) (ns *server.Server, sidecarSeed, launcherSeed string) {
	return natstest.DocumentedServer(t, "../deploy/nats/colocd-auth.conf")
}

// The accounts, exports, imports and launcher permissions documented for a
// shared server are the ones the embedded server uses (with wildcards for
// the sidecar).
func TestDocumentedLauncherPermissions(t *testing.T) {
	t.Parallel()
	keys := map[string]string{}
	for _, env := range []string{"COLOCD_SIDECAR_NKEY", "COLOCD_LAUNCHER_NKEY"} {
		pub, err := credfiles.Ensure(filepath.Join(t.TempDir(), "k.nk"))
		if err != nil {
			t.Fatal(err)
		}
		keys[env] = pub
	}
	keys["COLOCD_LAUNCHER_INBOX"] = v1.LauncherInbox(keys["COLOCD_LAUNCHER_NKEY"]) + ".>"
	opts := natstest.DocumentedWith(t, "../deploy/nats/colocd-auth.conf", t.TempDir(), keys)
	users := map[string]*server.NkeyUser{}
	for _, u := range opts.Nkeys {
		users[u.Nkey] = u
	}
	sidecar, launcher := users[keys["COLOCD_SIDECAR_NKEY"]], users[keys["COLOCD_LAUNCHER_NKEY"]]
	if sidecar == nil || launcher == nil {
		t.Fatalf("no sidecar or launcher user in the documented configuration: %+v", opts.Nkeys)
	}
	if sidecar.Account == nil || sidecar.Account.Name != v1.SidecarAccount || launcher.Account == nil || launcher.Account.Name != v1.LauncherAccount {
		t.Fatalf("sidecar in %v, launcher in %v; want %s and %s", sidecar.Account, launcher.Account, v1.SidecarAccount, v1.LauncherAccount)
	}
	want := natsserver.LauncherPermissions("*", keys["COLOCD_LAUNCHER_NKEY"])
	got := launcher.Permissions
	if !slices.Equal(got.Publish.Allow, want.Publish.Allow) || !slices.Equal(got.Subscribe.Allow, want.Subscribe.Allow) ||
		len(got.Publish.Deny) != 0 || len(got.Subscribe.Deny) != 0 || got.Response != nil {
		t.Errorf("documented launcher permissions\n%+v %+v\nwant\n%+v %+v", got.Publish, got.Subscribe, want.Publish, want.Subscribe)
	}
	services := v1.LauncherServices("*")
	for _, s := range services {
		if !sidecar.Account.IsExportService(s.Subject) {
			t.Errorf("the documented %s account does not export %s", v1.SidecarAccount, s.Subject)
			continue
		}
		want := s.Threshold
		if want == 0 {
			want = server.DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD
		}
		if got, err := sidecar.Account.ServiceExportResponseThreshold(s.Subject); err != nil || got != want {
			t.Errorf("the documented export %s keeps its answers' way open %v (%v), want %v", s.Subject, got, err, want)
		}
	}
	if n := launcher.Account.NumServiceImports(); n != len(services) {
		t.Errorf("the documented %s account imports %d services, want %d", v1.LauncherAccount, n, len(services))
	}
	// That every import shares the requester's identity, which the
	// sidecar queues by, TestBothServersTellTheTenant checks end to end.
}

// launcherSetups are the two servers a launcher meets: the embedded one and
// one with the documented configuration. Each dials the sidecar's and the
// launcher's connections.
var launcherSetups = []struct {
	name string
	dial func(t *testing.T) (sidecar, launcher *nats.Conn)
}{
	{"embedded", func(t *testing.T) (*nats.Conn, *nats.Conn) {
		e, seed := authServer(t)
		nc, err := Connect(e.ClientURL(), ConnectOptions{NKeySeedFile: seed})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return connect(t, e), nc
	}},
	{"documented", func(t *testing.T) (*nats.Conn, *nats.Conn) {
		ns, sidecarSeed, launcherSeed := documentedServer(t)
		side, err := Connect(ns.ClientURL(), ConnectOptions{NKeySeedFile: sidecarSeed, Options: []nats.Option{nats.CustomInboxPrefix(v1.SidecarInboxPrefix("gpu-a"))}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(side.Close)
		nc, err := Connect(ns.ClientURL(), ConnectOptions{NKeySeedFile: launcherSeed})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return side, nc
	}},
}

// TestLauncherCannotAimJetStream: JetStream answers a pull request on
// whatever reply subject it names. A launcher that names the JetStream API
// or a lease's KV subject as the reply of its own consumer's pull request
// must change nothing: on the embedded server and on a server with the
// documented configuration, the answer crosses back into the launchers'
// account, which has no JetStream.
func TestLauncherCannotAimJetStream(t *testing.T) {
	t.Parallel()
	onEachLauncherSetup(t, func(t *testing.T, x jetStreamTarget) {
		side, nc, ctx, js, events := x.side, x.launcher, x.ctx, x.js, x.events
		mustPublish(t, ctx, events, v1.Event{Type: v1.EventRevoke, LeaseID: "l1", JobID: "job-1", Reason: "real"})
		// The launcher's consumer, as the watch endpoint makes it.
		stream := v1.EventStreamName("gpu-a")
		serveOn(t, side, "gpu-a", newFakeHandler())
		c := NewClient(nc)
		sub, err := c.Events(ctx, "gpu-a", "job-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Stop()
		next(t, sub)
		name := consumerName(t, js, stream)
		next := "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + name
		leases := "KV_" + v1.LeaseBucketName("gpu-a")
		for _, reply := range []string{
			"$JS.API.STREAM.DELETE." + stream, "$JS.API.STREAM.DELETE." + leases,
			"$JS.API.STREAM.PURGE." + leases, "$KV." + v1.LeaseBucketName("gpu-a") + ".lease-1",
		} {
			// no_wait: an empty answer at once; batch 1 from the
			// start: the event itself.
			for _, body := range []string{`{"batch":1,"no_wait":true}`, `{"batch":1,"expires":1000000}`} {
				m := nats.NewMsg(next)
				m.Reply, m.Data = reply, []byte(body)
				if err := nc.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		// What the pull requests above could have done is done once a
		// later request has its answer.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Request("$JS.API.CONSUMER.INFO."+stream+"."+name, nil, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // answers that cross accounts are asynchronous
		for _, name := range []string{stream, leases} {
			info, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatalf("stream %s after the probes: %v", name, err)
			}
			if n := info.CachedInfo().State.Msgs; n != 1 {
				t.Errorf("stream %s holds %d messages after the probes, want 1", name, n)
			}
		}
		x.leaseUntouched(t)
	})
}

// A consumer's deliver subject is in its create request's body, which no
// permission sees: a push consumer on the events stream delivering to
// $JS.API.STREAM.DELETE.<lease bucket> would have JetStream delete the
// leases, inside the sidecars' account. No launcher may create a consumer
// at all: on the embedded server and on the documented configuration the
// create goes unanswered, and the leases stay.
func TestLauncherCannotPushIntoJetStream(t *testing.T) {
	t.Parallel()
	onEachLauncherSetup(t, func(t *testing.T, x jetStreamTarget) {
		nc, ctx, js, events := x.launcher, x.ctx, x.js, x.events
		stream, leases := v1.EventStreamName("gpu-a"), "KV_"+v1.LeaseBucketName("gpu-a")
		filter := v1.EndpointSubject("gpu-a", "events") + ".job-1"
		for _, deliver := range []string{"$JS.API.STREAM.DELETE." + leases, "$KV." + v1.LeaseBucketName("gpu-a") + ".lease-1"} {
			body, _ := json.Marshal(map[string]any{"stream_name": stream, "config": map[string]any{
				"name": "push", "deliver_subject": deliver, "filter_subject": filter,
				"deliver_policy": "all", "ack_policy": "none"}})
			for _, subj := range []string{"$JS.API.CONSUMER.CREATE." + stream + ".push." + filter, "$JS.API.CONSUMER.CREATE." + stream} {
				if m, err := nc.Request(subj, body, 500*time.Millisecond); err == nil {
					t.Errorf("consumer create on %s answered: %s", subj, m.Data)
				}
			}
		}
		mustPublish(t, ctx, events, v1.Event{Type: v1.EventRevoke, LeaseID: "l1", JobID: "job-1", Reason: "real"})
		time.Sleep(200 * time.Millisecond) // a push consumer would deliver now
		if _, err := js.Stream(ctx, leases); err != nil {
			t.Fatalf("lease bucket after the probes: %v", err)
		}
		x.leaseUntouched(t)
	})
}

// consumerName is the name of the one consumer on stream.
func consumerName(t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	st, err := js.Stream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range st.ConsumerNames(testCtx(t)).Name() {
		names = append(names, n)
	}
	if len(names) != 1 {
		t.Fatalf("consumers on %s: %v, want one", stream, names)
	}
	return names[0]
}

// jetStreamTarget is what a launcher's probes aim at on one of
// launcherSetups: sidecar gpu-a's lease bucket, with one lease, and its
// events stream.
type jetStreamTarget struct {
	side, launcher *nats.Conn
	ctx            context.Context
	kv             *KV
	js             jetstream.JetStream
	events         *Events
}

// onEachLauncherSetup runs probe in a parallel subtest for each of
// launcherSetups, on a fresh target.
func onEachLauncherSetup(t *testing.T, probe func(*testing.T, jetStreamTarget)) {
	for _, tc := range launcherSetups {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := jetStreamTarget{ctx: testCtx(t)}
			x.side, x.launcher = tc.dial(t)
			x.kv, x.js = leaseBucket(t, x.ctx, x.side, `{"secret":1}`)
			var err error
			if x.events, err = OpenEvents(x.ctx, x.js, "gpu-a", 0, 1); err != nil {
				t.Fatal(err)
			}
			probe(t, x)
		})
	}
}

// leaseUntouched fails t unless the lease is still as it was written.
func (x jetStreamTarget) leaseUntouched(t *testing.T) {
	t.Helper()
	if v, _, err := x.kv.Get(x.ctx, "lease-1"); err != nil || string(v) != `{"secret":1}` {
		t.Errorf("lease record %q, %v", v, err)
	}
}
