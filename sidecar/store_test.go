package sidecar

import (
	"context"
	"strings"
	"testing"

	"github.com/colocd/colocd/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// A lease bucket deleted under the sidecar shows in readiness, and the
// store loop recreates it from memory: the lease is stored again and its
// renewals work, without a restart.
func TestLostBucketIsRecreated(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "gpu-a", 10000), Options{})
	c := client(t, s)
	ctx := context.Background()
	d, err := c.Admit(ctx, s.ID(), admitReq("job-1", 10, 100))
	if err != nil || d.Lease == nil {
		t.Fatalf("admit: %+v, %v", d, err)
	}
	if err := s.Ready(); err != nil {
		t.Fatalf("not ready before the fault: %v", err)
	}
	js, err := jetstream.New(sidecarConn(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, bus.LeaseBucketName(s.ID())); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "store") {
		t.Fatalf("ready with the bucket gone: %v, want the store named", err)
	}
	if err := s.repairStore(ctx); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if err := s.Ready(); err != nil {
		t.Fatalf("not ready after the repair: %v", err)
	}
	kv, err := js.KeyValue(ctx, bus.LeaseBucketName(s.ID()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, d.Lease.ID); err != nil {
		t.Errorf("the lease is not in the recreated bucket: %v", err)
	}
	if _, err := c.Renew(ctx, s.ID(), &bus.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}); err != nil {
		t.Errorf("renew after the repair: %v", err)
	}
}
