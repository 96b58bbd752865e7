// Package natstest runs real nats-servers inside a test: a bare one, or one
// with the accounts and users of the documented deployment
// (deploy/nats/colocd-auth.conf).
package natstest

import (
	"fmt"
	"os"
	"path/filepath"
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
		t.Fatalf("nats-server %s not ready after %v", opts.ServerName, readyTimeout)
	}
	return ns
}

// Users writes the seed files of the documented sidecar and launcher users
// in dir (mode 0600) and puts their public keys in the environment
// variables the documented config reads them from.
func Users(t testing.TB, dir string) (sidecarSeed, launcherSeed string) {
	t.Helper()
	sidecarSeed, launcherSeed = filepath.Join(dir, "sidecar.nk"), filepath.Join(dir, "launcher.nk")
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
		t.Setenv(env, pub)
	}
	return sidecarSeed, launcherSeed
}

// Documented reads the config file at path (Users must have set its
// environment first) and points it at loopback, a free client port and
// JetStream stored in storeDir.
func Documented(t testing.TB, path, storeDir string) *server.Options {
	t.Helper()
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.JetStream, opts.StoreDir = true, storeDir
	return opts
}

// DocumentedServer runs one server with the documented config at path,
// JetStream on, and returns it with the seed files of its sidecar and
// launcher users.
func DocumentedServer(t testing.TB, path string) (ns *server.Server, sidecarSeed, launcherSeed string) {
	t.Helper()
	dir := t.TempDir()
	sidecarSeed, launcherSeed = Users(t, dir)
	return Start(t, Documented(t, path, filepath.Join(dir, "js"))), sidecarSeed, launcherSeed
}
