package sidecar

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/internal/credfiles"

	"github.com/nats-io/nats.go"
)

// TestSecretsNeverTravel: another launcher with the same identity listens
// on every inbox while a launcher takes, renews and releases a lease. It
// sees the answers, and neither the lease token nor the request_id is in
// any of them; nor are they in the lease store.
func TestSecretsNeverTravel(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "gpu-a", 10000), Options{})
	sniffer := launcherConn(t, s)
	var mu sync.Mutex
	var seen [][]byte
	arrived := make(chan struct{}, 64) // one per answer seen, as far as there is room
	// The widest it may read: its identity's inbox (the default seed's,
	// which the client below shares; others' it may not subscribe to).
	pub, err := credfiles.Ensure(s.LauncherNKeyFile())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sniffer.Subscribe(v1.LauncherInbox(pub)+".>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, append([]byte(nil), m.Data...))
		select {
		case arrived <- struct{}{}:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := sniffer.Flush(); err != nil {
		t.Fatal(err)
	}
	c := client(t, s)
	ctx := context.Background()
	req := admitReq("job-s", 10, 100)
	d, err := c.Admit(ctx, s.ID(), req)
	if err != nil || d.Lease == nil || d.Lease.Token == "" {
		t.Fatalf("admit: %+v, %v", d, err)
	}
	ref := &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}
	if _, err := c.Renew(ctx, s.ID(), ref); err != nil {
		t.Fatal(err)
	}

	// The store, read with the sidecar's own identity.
	kv := leaseBucket(ctx, t, s)
	entry, err := kv.Get(ctx, d.Lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, s.ID(), ref); err != nil {
		t.Fatal(err)
	}

	secrets := map[string][]byte{"token": []byte(ref.Token), "request_id": []byte(req.RequestID)}
	for name, secret := range secrets {
		if bytes.Contains(entry.Value(), secret) {
			t.Errorf("the lease record holds the %s", name)
		}
	}
	timeout := time.After(10 * time.Second)
	for n := range 3 { // admit, renew, release answers
		select {
		case <-arrived:
		case <-timeout:
			t.Fatalf("the sniffer saw %d answers, want the 3 it may see", n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range seen {
		for name, secret := range secrets {
			if bytes.Contains(m, secret) {
				t.Errorf("an answer on an inbox holds the %s: %s", name, m)
			}
		}
	}
}
