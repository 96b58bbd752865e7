package bus

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestEmbeddedListensForOutsideClients(t *testing.T) {
	var logs bytes.Buffer
	seed := filepath.Join(t.TempDir(), "launcher.nk")
	pub, err := NKeySeedFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	e, err := StartEmbedded(EmbeddedOptions{
		Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), ServerName: "colocd-test",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), SidecarID: "gpu-a", LauncherKeys: []string{pub},
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
	for _, opts := range []EmbeddedOptions{
		{},
		{StoreDir: t.TempDir()}, // no sidecar id
		{StoreDir: t.TempDir(), SidecarID: "gpu-a", LauncherKeys: []string{"SUAAA"}},
		{StoreDir: t.TempDir(), SidecarID: "gpu-a", Listen: "no-port"},
		{StoreDir: t.TempDir(), SidecarID: "gpu-a", Listen: "127.0.0.1:http"},
		{StoreDir: t.TempDir(), SidecarID: "gpu-a", Listen: "127.0.0.1:70000"},
	} {
		if e, err := StartEmbedded(opts); err == nil {
			e.Shutdown()
			t.Errorf("StartEmbedded(%+v) succeeded", opts)
		}
	}
}

func TestConnectValidates(t *testing.T) {
	tests := []struct {
		name string
		url  string
		opts ConnectOptions
	}{
		{"no url", "", ConnectOptions{}},
		{"creds and nkey", "nats://127.0.0.1:1", ConnectOptions{Credentials: "a.creds", NKeySeedFile: "seed"}},
		{"cert without key", "nats://127.0.0.1:1", ConnectOptions{TLS: TLSFiles{Cert: "c.pem"}}},
		{"missing nkey file", "nats://127.0.0.1:1", ConnectOptions{NKeySeedFile: t.TempDir() + "/none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if nc, err := Connect(tt.url, tt.opts); err == nil {
				nc.Close()
				t.Error("Connect succeeded")
			}
		})
	}
}

// A sidecar may start before its NATS server: Connect keeps trying.
func TestConnectWaitsForServer(t *testing.T) {
	nc, err := Connect("nats://127.0.0.1:1", ConnectOptions{Options: []nats.Option{nats.ReconnectWait(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.IsConnected() {
		t.Error("connected to nothing")
	}
}

// A store dir that cannot be written is named at once, not after the
// server's ten-second wait for readiness.
func TestEmbeddedStoreDirNotWritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := StartEmbedded(EmbeddedOptions{StoreDir: filepath.Join(file, "nats"), SidecarID: "gpu-a"})
	if err == nil {
		e.Shutdown()
		t.Fatal("started on a store dir inside a file")
	}
	if !strings.Contains(err.Error(), "store dir") || !strings.Contains(err.Error(), file) {
		t.Errorf("error %q does not name the store dir", err)
	}
}
