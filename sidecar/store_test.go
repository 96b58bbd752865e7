package sidecar

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// withStoredLease is a running sidecar with the given id, a launcher's
// client of it, and the decision of the one lease it stores.
func withStoredLease(t *testing.T, id string) (*running, *bus.Client, *v1.Decision) {
	t.Helper()
	s := start(t, testConfig(t, id, 10000), Options{})
	c := client(t, s)
	return s, c, leased(context.Background(), t, c, s.ID(), admitReq("job-"+id, 10, 100))
}

// A lease bucket deleted under the sidecar shows in readiness, and the
// store loop recreates it from memory: the lease is stored again and its
// renewals work, without a restart.
func TestLostBucketIsRecreated(t *testing.T) {
	t.Parallel()
	s, c, d := withStoredLease(t, "gpu-a")
	ctx := context.Background()
	if err := s.Ready(); err != nil {
		t.Fatalf("not ready before the fault: %v", err)
	}
	js, err := jetstream.New(sidecarConn(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, v1.LeaseBucketName(s.ID())); err != nil {
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
	kv, err := js.KeyValue(ctx, v1.LeaseBucketName(s.ID()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, d.Lease.ID); err != nil {
		t.Errorf("the lease is not in the recreated bucket: %v", err)
	}
	if _, err := c.Renew(ctx, s.ID(), &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}); err != nil {
		t.Errorf("renew after the repair: %v", err)
	}
}

// A write whose acknowledgement was lost may have landed. A release whose
// delete landed unacknowledged, then retried, finds its own delete marker
// (a revision conflict): the lease is released all the same, not stuck. A
// save that landed unacknowledged is found in the store by its bytes.
func TestStoreWritesThatLandedUnacknowledged(t *testing.T) {
	t.Parallel()
	s, c, d := withStoredLease(t, "gpu-ack")
	ctx := context.Background()
	kv := s.store.bucket()
	// The first try's delete landed; its acknowledgement never came.
	if err := kv.Delete(ctx, d.Lease.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, s.ID(), &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}); err != nil {
		t.Fatalf("the retried release: %v", err)
	}
	if st, err := c.Status(ctx, s.ID()); err != nil || len(st.Leases) != 0 {
		t.Fatalf("after the release: %v, %d leases", err, len(st.Leases))
	}

	want := []byte(`{"landed":true}`)
	rev, err := kv.Create(ctx, "lease-landed", want)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.store.landed(ctx, "lease-landed", want); !ok || got != rev {
		t.Errorf("landed = %d, %v; want %d, true", got, ok, rev)
	}
	if _, ok := s.store.landed(ctx, "lease-landed", []byte(`{"landed":false}`)); ok {
		t.Error("another record counts as the save that landed")
	}
	if _, ok := s.store.landed(ctx, "lease-never", want); ok {
		t.Error("a missing record counts as the save that landed")
	}
}
