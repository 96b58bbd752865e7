package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Errors of KV, for callers to branch on with errors.Is. They are the
// store's own (a key, a revision): the lease book's conflicts and missing
// leases are admission's ErrConflict and ErrNotFound, to which the sidecar's
// store adapter maps these.
var (
	// ErrExists: Create found the key already there.
	ErrExists = errors.New("kv: key exists")
	// ErrRevisionMismatch: the key's revision is not the one given
	// (compare-and-swap lost).
	ErrRevisionMismatch = errors.New("kv: revision conflict")
	// ErrNoKey: the key does not exist or was deleted.
	ErrNoKey = errors.New("kv: key not found")
)

// KV is a JetStream key-value bucket with create-only writes and
// compare-and-swap on revisions; the sidecar keeps its leases in one. Keys
// are made of ASCII letters, digits and "-/_=.". Values are opaque.
type KV struct {
	kv jetstream.KeyValue
}

// Entry is one key's current value and revision.
type Entry struct {
	// Key is the entry's key.
	Key string
	// Value is the stored bytes.
	Value []byte
	// Revision is what Update and Delete compare against.
	Revision uint64
}

// OpenKV binds to bucket, creating it (file storage, replicas copies, one
// revision kept per key) when it does not exist; an existing bucket keeps
// its configuration. Use LeaseBucketName(sidecarID) for a sidecar's leases.
func OpenKV(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (*KV, error) {
	if replicas < 1 {
		replicas = 1
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "colocd leases",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("open kv %s: %w", bucket, err)
	}
	return &KV{kv: kv}, nil
}

// Bucket returns the bucket's name.
func (k *KV) Bucket() string { return k.kv.Bucket() }

// Create stores value under a new key and returns its revision; ErrExists
// if the key holds a value.
func (k *KV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := k.kv.Create(ctx, key, value)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("kv create %q: %w", key, ErrExists)
	}
	if err != nil {
		return 0, fmt.Errorf("kv create %q: %w", key, err)
	}
	return rev, nil
}

// Update replaces the value of key if its revision is still rev, and
// returns the new revision; ErrRevisionMismatch otherwise (also when the key is
// gone).
func (k *KV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if rev == 0 {
		return 0, fmt.Errorf("kv update %q: revision 0 (use Create)", key)
	}
	n, err := k.kv.Update(ctx, key, value, rev)
	if err != nil {
		return 0, fmt.Errorf("kv update %q: %w", key, mapCAS(err))
	}
	return n, nil
}

// Get returns the value and revision of key; ErrNoKey when it has none.
func (k *KV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := k.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, fmt.Errorf("kv get %q: %w", key, ErrNoKey)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("kv get %q: %w", key, err)
	}
	return e.Value(), e.Revision(), nil
}

// Delete removes key if its revision is still rev (ErrRevisionMismatch otherwise);
// rev 0 deletes whatever the revision.
func (k *KV) Delete(ctx context.Context, key string, rev uint64) error {
	var opts []jetstream.KVDeleteOpt
	if rev != 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	if err := k.kv.Delete(ctx, key, opts...); err != nil {
		return fmt.Errorf("kv delete %q: %w", key, mapCAS(err))
	}
	return nil
}

// List returns every key's current entry, sorted by key.
func (k *KV) List(ctx context.Context) ([]Entry, error) {
	w, err := k.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("kv list: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []Entry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("kv list: watcher closed")
			}
			if e == nil { // all current values delivered
				slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
				return out, nil
			}
			out = append(out, Entry{Key: e.Key(), Value: e.Value(), Revision: e.Revision()})
		case <-ctx.Done():
			return nil, fmt.Errorf("kv list: %w", ctx.Err())
		}
	}
}

// Unacknowledged reports whether a KV write's error leaves it open whether
// the write landed: no acknowledgement came in time (a deadline, a timeout,
// no answer from the stream), unlike a refusal such as ErrRevisionMismatch. The
// caller reads the key to learn which.
func Unacknowledged(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// mapCAS maps JetStream's revision mismatch to ErrRevisionMismatch.
func mapCAS(err error) error {
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return ErrRevisionMismatch
	}
	return err
}

// ErrBucketGone: the bucket no longer exists (deleted, or its store lost).
var ErrBucketGone = errors.New("kv: bucket not found")

// Check asks the server for the bucket's state: nil when it is there,
// ErrBucketGone when it is not, another error when the server does not
// answer.
func (k *KV) Check(ctx context.Context) error {
	_, err := k.kv.Status(ctx)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound):
		return fmt.Errorf("kv %s: %w", k.kv.Bucket(), ErrBucketGone)
	case err != nil:
		return fmt.Errorf("kv %s: %w", k.kv.Bucket(), err)
	}
	return nil
}

// PurgeDeletes removes the markers that deleted keys leave behind, when they
// are older than olderThan: every deleted lease leaves one, and a bucket
// full of them makes listing slow.
func (k *KV) PurgeDeletes(ctx context.Context, olderThan time.Duration) error {
	if olderThan <= 0 {
		olderThan = -1 // nats.go: every marker, whatever its age
	}
	if err := k.kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(olderThan)); err != nil {
		return fmt.Errorf("kv %s: purge delete markers: %w", k.kv.Bucket(), err)
	}
	return nil
}
