// Package natstest runs real nats-servers inside a test: a bare one, or one
// with the accounts and users of the documented deployment
// (deploy/nats/colocd-auth.conf).
package natstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// readyTimeout is how long a server may take to open its listeners: long,
// so that a loaded machine does not fail the test.
const readyTimeout = 20 * time.Second

// Start starts a server from opts, silenced and without signal handlers,
// waits until it takes connections, and shuts it down when the test ends.
func Start(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	opts.NoSigs, opts.NoLog = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(readyTimeout) {
		var down []string
		if ns.Addr() == nil {
			down = append(down, fmt.Sprintf("clients (port %d)", opts.Port))
		}
		if opts.Cluster.Port != 0 && ns.ClusterAddr() == nil {
			down = append(down, fmt.Sprintf("routes (port %d)", opts.Cluster.Port))
		}
		t.Fatalf("nats-server %s not ready after %v: %v not listening (a port taken?)", opts.ServerName, readyTimeout, down)
	}
	return ns
}

// Keys are the documented sidecar and launcher users of one test: their
// seed files and the definitions of their public keys, the variables the
// documented config reads.
type Keys struct {
	SidecarSeed, LauncherSeed string
	// vars defines COLOCD_SIDECAR_NKEY, COLOCD_LAUNCHER_NKEY and
	// COLOCD_LAUNCHER_INBOX.
	vars string
}

// Users writes the seed files of the documented sidecar and launcher users
// in dir (mode 0600). It leaves the environment alone, so that tests that
// use it run in parallel.
func Users(t testing.TB, dir string) Keys {
	t.Helper()
	k := Keys{SidecarSeed: filepath.Join(dir, "sidecar.nk"), LauncherSeed: filepath.Join(dir, "launcher.nk")}
	var vars strings.Builder
	for _, u := range []struct{ name, path string }{{"COLOCD_SIDECAR_NKEY", k.SidecarSeed}, {"COLOCD_LAUNCHER_NKEY", k.LauncherSeed}} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, err := kp.Seed()
		if err != nil {
			t.Fatal(err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(u.path, append(seed, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&vars, "%s: %q\n", u.name, pub)
		if u.name == "COLOCD_LAUNCHER_NKEY" {
			fmt.Fprintf(&vars, "COLOCD_LAUNCHER_INBOX: %q\n", "_INBOX."+pub+".>")
		}
	}
	k.vars = vars.String()
	return k
}

// Documented reads the documented config at path with k's keys, and points it at loopback, a free client port and
// JetStream stored in storeDir.
func Documented(t testing.TB, path, storeDir string, k Keys) *server.Options {
	t.Helper()
	// The documented file reads the keys from the environment; a copy
	// after their definitions reads them from the file instead (an
	// included file would not see them), and leaves the environment alone.
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(wrapper, append([]byte(k.vars), doc...), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(wrapper)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.JetStream, opts.StoreDir = true, storeDir
	return opts
}

// DocumentedServer runs one server with the documented config at path,
// JetStream on, and returns it with its users' keys.
func DocumentedServer(t testing.TB, path string) (*server.Server, Keys) {
	t.Helper()
	dir := t.TempDir()
	k := Users(t, dir)
	return Start(t, Documented(t, path, filepath.Join(dir, "js"), k)), k
}

// FreePort returns a loopback port nothing listens on, from below the
// kernel's ephemeral range (ip_local_port_range), for a server that must
// know its peers' ports before they start (cluster routes, leaf remotes).
// A port from the ephemeral range, as ":0" gives, can be taken by any
// outgoing connection between the moment it is found free and the moment
// the server binds it; one below that range can only be taken by another
// listener that picks the same number.
func FreePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 200 {
		p := 10000 + rand.IntN(low-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		l.Close()
		return p
	}
	t.Fatalf("no free port in [10000, %d)", low)
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read, Linux's default).
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 11000 {
		return 32768
	}
	return low
}
