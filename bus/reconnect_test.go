package bus

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/natstest"
	"github.com/nats-io/nats.go"
)

// A request whose server went away before the answer came is sent again
// as soon as the connection is back, not after the caller's timeout: here
// the first copy is never answered, and the caller's minute would run
// out without the resend.
func TestRequestResentAfterReconnect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sidecarSeed, launcherSeed, vars := natstest.Seeds(t, dir)
	opts := natstest.DocumentedWith(t, "../deploy/nats/colocd-auth.conf", filepath.Join(dir, "js"), vars)
	opts.Port = natstest.FreePort(t)
	ns := natstest.Start(t, opts)
	fast := nats.ReconnectWait(50 * time.Millisecond)
	side, err := Connect(ns.ClientURL(), ConnectOptions{NKeySeedFile: sidecarSeed, Options: []nats.Option{fast, nats.CustomInboxPrefix(v1.SidecarInboxPrefix("gpu-a"))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(side.Close)
	var seen atomic.Int64
	first := make(chan struct{})
	if _, err := side.Subscribe(v1.EndpointSubject("gpu-a", v1.EndpointStatus), func(m *nats.Msg) {
		if seen.Add(1) == 1 {
			close(first) // lost with its server: never answered
			return
		}
		_ = m.Respond([]byte("{}"))
	}); err != nil {
		t.Fatal(err)
	}
	// A release whose first copy released the lease: the second finds it
	// gone, and the caller is told it is released.
	var releases atomic.Int64
	firstRelease := make(chan struct{})
	if _, err := side.Subscribe(v1.EndpointSubject("gpu-a", v1.EndpointRelease), func(m *nats.Msg) {
		if releases.Add(1) == 1 {
			close(firstRelease)
			return
		}
		r := nats.NewMsg(m.Reply)
		r.Header.Set("Nats-Service-Error-Code", "404")
		r.Header.Set("Nats-Service-Error", "no lease l-1")
		_ = side.PublishMsg(r)
	}); err != nil {
		t.Fatal(err)
	}
	if err := side.Flush(); err != nil {
		t.Fatal(err)
	}
	launcher, err := Connect(ns.ClientURL(), ConnectOptions{NKeySeedFile: launcherSeed, Options: []nats.Option{fast}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(launcher.Close)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := NewClient(launcher).Status(ctx, "gpu-a")
		done <- err
	}()
	<-first
	ns.Shutdown()
	ns.WaitForShutdown()
	ns2 := natstest.Start(t, opts) // the same port: both connections come back
	if err := <-done; err != nil {
		t.Fatalf("status across the server's restart: %v, want the answer to the copy sent after the reconnect", err)
	}
	if n := seen.Load(); n < 2 {
		t.Errorf("the sidecar saw %d copies of the request, want the resent one too", n)
	}

	released := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		released <- NewClient(launcher).Release(ctx, "gpu-a", &v1.LeaseRef{LeaseID: "l-1", Token: "t"})
	}()
	<-firstRelease
	ns2.Shutdown()
	ns2.WaitForShutdown()
	natstest.Start(t, opts)
	if err := <-released; err != nil {
		t.Errorf("release across the server's restart: %v, want done (the second copy found it gone)", err)
	}
}
