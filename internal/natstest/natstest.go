// Package natstest runs real nats-servers inside a test: a bare one, or one
// with the accounts and users of the documented deployment
// (deploy/nats/colocd-auth.conf).
package natstest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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

// Connect connects a plain client to ns with opts and closes it when the
// test ends.
func Connect(t testing.TB, ns *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Seeds writes the seed files of the documented sidecar and launcher users
// in dir (mode 0600) and returns them with the variables the documented
// config reads their public keys from (COLOCD_SIDECAR_NKEY,
// COLOCD_LAUNCHER_NKEY, COLOCD_LAUNCHER_INBOX), for DocumentedWith.
func Seeds(t testing.TB, dir string) (sidecarSeed, launcherSeed string, vars map[string]string) {
	t.Helper()
	sidecarSeed, launcherSeed = filepath.Join(dir, "sidecar.nk"), filepath.Join(dir, "launcher.nk")
	vars = map[string]string{}
	for env, path := range map[string]string{"COLOCD_SIDECAR_NKEY": sidecarSeed, "COLOCD_LAUNCHER_NKEY": launcherSeed} {
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
		if err := os.WriteFile(path, append(seed, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		vars[env] = pub
		if env == "COLOCD_LAUNCHER_NKEY" {
			vars["COLOCD_LAUNCHER_INBOX"] = "_INBOX." + pub + ".>"
		}
	}
	return sidecarSeed, launcherSeed, vars
}

// documented reads the config file at path (whose variables are defined
// in it, or in the environment) and points it at loopback, a free client
// port and JetStream stored in storeDir.
func documented(t testing.TB, path, storeDir string) *server.Options {
	t.Helper()
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.JetStream, opts.StoreDir = true, storeDir
	return opts
}

// DocumentedWith reads the documented config at path with vars (from
// Seeds) defined at the top of a copy of it, instead of read from the
// process environment, so that tests with users of their own run in
// parallel, and points it at loopback, a free client port and JetStream
// stored in storeDir. A variable the config
// defines itself still wins over the environment, as nats-server resolves
// a config's own variables first.
func DocumentedWith(t testing.TB, path, storeDir string, vars map[string]string) *server.Options {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		fmt.Fprintf(&b, "%s: %s\n", name, strconv.Quote(vars[name]))
	}
	b.Write(doc)
	rendered := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(rendered, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return documented(t, rendered, storeDir)
}

// DocumentedServer runs one server with the documented config at path,
// JetStream on, and returns it with the seed files of its sidecar and
// launcher users. It leaves the environment alone: tests that use it may
// run in parallel.
func DocumentedServer(t testing.TB, path string) (ns *server.Server, sidecarSeed, launcherSeed string) {
	t.Helper()
	dir := t.TempDir()
	sidecarSeed, launcherSeed, vars := Seeds(t, dir)
	return Start(t, DocumentedWith(t, path, filepath.Join(dir, "js"), vars)), sidecarSeed, launcherSeed
}

// FreePort returns a loopback port nothing listens on, from below the
// kernel's ephemeral range (ip_local_port_range), for a server that must
// know its peers' ports before they start (cluster routes, leaf remotes).
// A port from the ephemeral range, as ":0" gives, can be taken by any
// outgoing connection between the moment it is found free and the moment
// the server binds it; one below that range can only be taken by another
// listener that picks the same number. A port handed out is reserved for
// portHold across every test process on the machine (a file in the temp
// dir), so that a test whose server is down for a while (a restart) does
// not find its port taken by another test's server, whose refusal would
// end its clients' reconnects.
func FreePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 200 {
		p := 10000 + rand.IntN(low-10000)
		if !reservePort(p) {
			continue // handed out to another test a moment ago
		}
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

// portHold is how long a port FreePort handed out is not handed out again:
// longer than any test here runs.
const portHold = 15 * time.Minute

// reservePort claims port p for portHold with a file that only one
// process can create; a claim older than that is taken over.
func reservePort(p int) bool {
	dir := filepath.Join(os.TempDir(), "colocd-test-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true // no reservations: the listen check alone
	}
	path := filepath.Join(dir, strconv.Itoa(p))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		f.Close()
		return true
	}
	fi, serr := os.Stat(path)
	if serr != nil || time.Since(fi.ModTime()) < portHold {
		return false
	}
	now := time.Now()
	return os.Chtimes(path, now, now) == nil
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
