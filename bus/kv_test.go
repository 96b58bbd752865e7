package bus

import (
	"errors"
	"fmt"
	"testing"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
)

func openKV(t *testing.T, e *natsserver.Embedded, bucket string) *KV {
	t.Helper()
	js := jetStreamOf(t, e)
	kv, err := OpenKV(testCtx(t), js, bucket, 1)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func TestKVCompareAndSwap(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	kv := openKV(t, e, v1.LeaseBucketName("GPU-1234"))
	ctx := testCtx(t)

	rev1, err := kv.Create(ctx, "l-1", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "l-1", []byte("again")); !errors.Is(err, ErrExists) {
		t.Errorf("second Create: got %v, want ErrExists", err)
	}
	rev2, err := kv.Update(ctx, "l-1", []byte("v2"), rev1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "l-1", []byte("stale"), rev1); !errors.Is(err, ErrRevisionMismatch) {
		t.Errorf("Update with stale revision: got %v, want ErrRevisionMismatch", err)
	}
	if _, err := kv.Update(ctx, "l-missing", []byte("x"), rev1); !errors.Is(err, ErrRevisionMismatch) {
		t.Errorf("Update of a missing key: got %v, want ErrRevisionMismatch", err)
	}
	val, rev, err := kv.Get(ctx, "l-1")
	if err != nil || string(val) != "v2" || rev != rev2 {
		t.Errorf("Get = %q, %d, %v; want v2, %d", val, rev, err, rev2)
	}
	if err := kv.Delete(ctx, "l-1", rev1); !errors.Is(err, ErrRevisionMismatch) {
		t.Errorf("Delete with stale revision: got %v, want ErrRevisionMismatch", err)
	}
	if _, err := kv.Create(ctx, "l-2", []byte("w")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "l-1", rev2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := kv.Get(ctx, "l-1"); !errors.Is(err, ErrNoKey) {
		t.Errorf("Get after Delete: got %v, want ErrNoKey", err)
	}
	if _, _, err := kv.Get(ctx, "never"); !errors.Is(err, ErrNoKey) {
		t.Errorf("Get of a missing key: got %v, want ErrNoKey", err)
	}
	// A deleted key can be created again.
	rev3, err := kv.Create(ctx, "l-1", []byte("v3"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "l-0", []byte("z")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "l-0", 0); err != nil {
		t.Fatal(err)
	}
	entries, err := kv.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, en := range entries {
		keys = append(keys, en.Key)
	}
	if diff := cmp.Diff([]string{"l-1", "l-2"}, keys); diff != "" {
		t.Errorf("List keys (-want +got):\n%s", diff)
	}
	if entries[0].Revision != rev3 || string(entries[0].Value) != "v3" {
		t.Errorf("List l-1 = %+v, want v3 at %d", entries[0], rev3)
	}
}

func TestKVEmptyList(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	kv := openKV(t, e, "empty")
	entries, err := kv.List(testCtx(t))
	if err != nil || len(entries) != 0 {
		t.Errorf("List = %v, %v; want nothing", entries, err)
	}
}

func TestKVSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bucket := v1.LeaseBucketName("gpu-a")

	e1, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: dir, SidecarID: "gpu-a"})
	if err != nil {
		t.Fatal(err)
	}
	nc1, err := e1.Conn()
	if err != nil {
		t.Fatal(err)
	}
	js1, _ := jetstream.New(nc1)
	kv1, err := OpenKV(testCtx(t), js1, bucket, 1)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv1.Create(testCtx(t), "l-1", []byte(`{"id":"l-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	nc1.Close()
	e1.Shutdown()

	e2 := startServerIn(t, dir)
	kv2 := openKV(t, e2, bucket)
	val, got, err := kv2.Get(testCtx(t), "l-1")
	if err != nil || string(val) != `{"id":"l-1"}` || got != rev {
		t.Fatalf("after restart Get = %q, %d, %v; want the lease at %d", val, got, err, rev)
	}
	if _, err := kv2.Update(testCtx(t), "l-1", []byte(`{"id":"l-1","renewed":true}`), rev); err != nil {
		t.Errorf("CAS after restart: %v", err)
	}
}

// Deleted keys leave markers; PurgeDeletes removes them and keeps the live
// keys, and Check tells a bucket that is there from one that is gone.
func TestPurgeDeletesAndCheck(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	js := jetStreamOf(t, e)
	ctx := testCtx(t)
	kv, err := OpenKV(ctx, js, "purge", 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := kv.Create(ctx, fmt.Sprint("k", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if i >= 2 {
			if err := kv.Delete(ctx, fmt.Sprint("k", i), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	msgs := func() uint64 {
		s, err := js.Stream(ctx, "KV_purge")
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.Msgs
	}
	if n := msgs(); n != 20 {
		t.Fatalf("%d messages before the purge, want 20 (2 values, 18 markers)", n)
	}
	if err := kv.PurgeDeletes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n := msgs(); n != 2 {
		t.Errorf("%d messages after the purge, want the 2 live values", n)
	}
	if err := kv.Check(ctx); err != nil {
		t.Errorf("Check of a live bucket: %v", err)
	}
	if err := js.DeleteKeyValue(ctx, "purge"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Check(ctx); !errors.Is(err, ErrBucketGone) {
		t.Errorf("Check of a deleted bucket: %v, want ErrBucketGone", err)
	}
}
