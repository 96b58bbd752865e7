package bus

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/credfiles"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func TestEmbeddedListensForOutsideClients(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	seed := filepath.Join(t.TempDir(), "launcher.nk")
	pub, err := credfiles.Ensure(seed)
	if err != nil {
		t.Fatal(err)
	}
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{
		Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), ServerName: "colocd-test",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), SidecarID: "gpu-a", Launchers: []natsserver.Launcher{{Name: "test", Key: pub}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	url := e.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") {
		t.Fatalf("ClientURL %q", url)
	}
	serve(t, e, "gpu-a", newFakeHandler())

	nc, err := Connect(url, ConnectOptions{Name: "launcher", NKeySeedFile: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := NewClient(nc).Status(testCtx(t), "gpu-a")
	if err != nil || st.Sidecar != "gpu-a" {
		t.Fatalf("Status over TCP = %+v, %v", st, err)
	}
	if !strings.Contains(logs.String(), "Server is ready") {
		t.Errorf("server log not in the logger:\n%s", logs.String())
	}
}

func TestEmbeddedInProcessOnly(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	if url := e.ClientURL(); url != "" {
		t.Errorf("ClientURL %q without Listen", url)
	}
	nc := connect(t, e)
	sub, err := nc.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "hi" {
		t.Errorf("in-process message %v, %v", m, err)
	}
}

func TestStartEmbeddedValidates(t *testing.T) {
	t.Parallel()
	for _, opts := range []natsserver.EmbeddedOptions{
		{},
		{StoreDir: t.TempDir()}, // no sidecar id
		{StoreDir: t.TempDir(), SidecarID: "gpu-a", Launchers: []natsserver.Launcher{{Name: "bad", Key: "SUAAA"}}},
		{StoreDir: t.TempDir(), SidecarID: "gpu-a", Listen: "no-port"},
		{StoreDir: t.TempDir(), SidecarID: "gpu-a", Listen: "127.0.0.1:http"},
		{StoreDir: t.TempDir(), SidecarID: "gpu-a", Listen: "127.0.0.1:70000"},
	} {
		if e, err := natsserver.StartEmbedded(opts); err == nil {
			e.Shutdown()
			t.Errorf("StartEmbedded(%+v) succeeded", opts)
		}
	}
}

// A store dir that cannot be written is named at once, not after the
// server's ten-second wait for readiness.
func TestEmbeddedStoreDirNotWritable(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: filepath.Join(file, "nats"), SidecarID: "gpu-a"})
	if err == nil {
		e.Shutdown()
		t.Fatal("started on a store dir inside a file")
	}
	if !strings.Contains(err.Error(), "store dir") || !strings.Contains(err.Error(), file) {
		t.Errorf("error %q does not name the store dir", err)
	}
}

// A store written when everything lived in the global account (colocd
// before the sidecars' account) moves to the sidecars' account at start:
// the lease bucket comes back with its leases.
func TestEmbeddedMovesTheGlobalAccountsStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old, err := server.NewServer(&server.Options{JetStream: true, StoreDir: dir, DontListen: true, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	old.Start()
	if !old.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(old))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	leaseBucket(t, ctx, nc, `{"kept":1}`)
	nc.Close()
	old.Shutdown()
	old.WaitForShutdown()

	e := startServerIn(t, dir)
	js := jetStreamOf(t, e)
	kv, err := OpenKV(ctx, js, v1.LeaseBucketName("gpu-a"), 1)
	if err != nil {
		t.Fatalf("lease bucket after the move: %v", err)
	}
	if v, _, err := kv.Get(ctx, "lease-1"); err != nil || string(v) != `{"kept":1}` {
		t.Errorf("lease after the move: %v, %v", v, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream", server.DEFAULT_GLOBAL_ACCOUNT)); err == nil {
		t.Error("the global account's store is still there")
	}
}

// With a store in both accounts, nothing is moved and nothing starts: one
// of them holds the leases, and only a person can tell which.
func TestEmbeddedRefusesTwoStores(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, acc := range []string{server.DEFAULT_GLOBAL_ACCOUNT, v1.SidecarAccount} {
		if err := os.MkdirAll(filepath.Join(dir, "jetstream", acc, "streams"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	_, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: dir, SidecarID: "gpu-a"})
	if err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("StartEmbedded with two stores: %v, want a refusal naming both", err)
	}
	for _, acc := range []string{server.DEFAULT_GLOBAL_ACCOUNT, v1.SidecarAccount} {
		if _, err := os.Stat(filepath.Join(dir, "jetstream", acc, "streams")); err != nil {
			t.Errorf("%s: %v", acc, err)
		}
	}
}
