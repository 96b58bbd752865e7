package bus

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/natstest"
	"github.com/colocd/colocd/internal/syncio"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func TestConnectValidates(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	nc, err := Connect("nats://127.0.0.1:1", ConnectOptions{Options: []nats.Option{nats.ReconnectWait(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.IsConnected() {
		t.Error("connected to nothing")
	}
}

// A slow consumer on a connection with LogHandlers is an error in the
// structured log, not a line on stderr.
func TestLogHandlersLogSlowConsumers(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t, &server.Options{Host: "127.0.0.1", Port: -1})
	var buf syncio.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	nc := natstest.Connect(t, ns, LogHandlers(log)...)
	block := make(chan struct{})
	defer close(block)
	sub, err := nc.Subscribe("flood", func(*nats.Msg) { <-block })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(4, 1<<20); err != nil {
		t.Fatal(err)
	}
	for range 64 {
		if err := nc.Publish("flood", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()
	for end := time.Now().Add(time.Minute); !strings.Contains(buf.String(), "slow consumer"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no slow consumer error in the log a minute on: %q", buf.String())
		}
	}
	if !strings.Contains(buf.String(), "subject=flood") {
		t.Errorf("log %q does not name the subject", buf.String())
	}
}
