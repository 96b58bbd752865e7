package bus

import (
	"path/filepath"
	"testing"

	"github.com/colocd/colocd/natsserver"

	"github.com/colocd/colocd/internal/credfiles"
	"github.com/colocd/colocd/internal/testpki"
	"github.com/nats-io/nats.go"
)

// The embedded listener with mutual TLS: a launcher needs the CA, a client
// certificate and its NKey; without any one of them it does not get in.
// Connect's TLS options are the ones a sidecar uses for a remote server.
func TestEmbeddedMutualTLS(t *testing.T) {
	t.Parallel()
	pki := testpki.Write(t, t.TempDir())
	seed := filepath.Join(t.TempDir(), "launcher.nk")
	pub, err := credfiles.Ensure(seed)
	if err != nil {
		t.Fatal(err)
	}
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), SidecarID: "gpu-a", Launchers: []natsserver.Launcher{{Name: "test", Key: pub}},
		TLS: natsserver.ServerTLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	serve(t, e, "gpu-a", newFakeHandler())
	once := []nats.Option{nats.RetryOnFailedConnect(false), nats.MaxReconnects(0)}
	tests := []struct {
		name string
		opts ConnectOptions
		ok   bool
	}{
		{"ca, client certificate and nkey", ConnectOptions{NKeySeedFile: seed, TLS: TLSFiles{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}}, true},
		{"no client certificate", ConnectOptions{NKeySeedFile: seed, TLS: TLSFiles{CA: pki.CA}}, false},
		{"no nkey", ConnectOptions{TLS: TLSFiles{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}}, false},
		{"a CA that did not sign the server", ConnectOptions{NKeySeedFile: seed, TLS: TLSFiles{CA: pki.OtherCA, Cert: pki.ClientCert, Key: pki.ClientKey}}, false},
		{"no TLS at all", ConnectOptions{NKeySeedFile: seed}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Options = once
			nc, err := Connect(e.ClientURL(), tt.opts)
			if !tt.ok {
				if err == nil {
					nc.Close()
					t.Fatal("connected")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if !nc.TLSRequired() {
				t.Error("the connection is not TLS")
			}
			if _, err := NewClient(nc).Status(testCtx(t), "gpu-a"); err != nil {
				t.Errorf("status over mutual TLS: %v", err)
			}
		})
	}
	if _, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: t.TempDir(), SidecarID: "gpu-a", TLS: natsserver.ServerTLSFiles{Cert: pki.ServerCert}}); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}
