package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go/jetstream"
)

// ProfileBucket is the JetStream object store bucket that holds training
// profiles by content: a launcher puts a large profile there once and sends
// its reference ("profile_ref") in each admit and quote instead of the
// profile itself; every sidecar on the NATS system can read it.
const ProfileBucket = "colocd_profiles"

// Errors of ProfileStore.Get, for callers to branch on with errors.Is.
var (
	// ErrProfileNotFound: no profile with that reference is in the bucket.
	ErrProfileNotFound = errors.New("profile not found")
	// ErrProfileTooLarge: the stored object exceeds MaxProfileBytes.
	ErrProfileTooLarge = errors.New("profile too large")
	// ErrProfileCorrupt: the stored object does not hash to its name.
	ErrProfileCorrupt = errors.New("profile corrupt")
)

// MaxProfileBytes bounds a profile read by reference: a sidecar parses it
// whole. 16 MiB is 80 times the 870-kernel step in testdata.
const MaxProfileBytes = 16 << 20

// maxProfileBytes is MaxProfileBytes; tests lower it.
var maxProfileBytes uint64 = MaxProfileBytes

// ProfileStoreMaxBytes bounds the whole profile bucket: a put that would
// pass it is refused until old profiles age out.
const ProfileStoreMaxBytes = 1 << 30

// ProfileStoreMaxAge is how long a profile stays in the bucket after it
// was last written. A put of a profile written more than half of that ago
// writes it again, which restarts its age, so a profile in use (a lease
// stores its profile on every renew) stays; one nobody uses ages out.
const ProfileStoreMaxAge = 7 * 24 * time.Hour

// ProfileStore is the profile bucket. Objects are named by their reference,
// so a put is idempotent and a get checks what it read against the name.
type ProfileStore struct {
	os jetstream.ObjectStore
}

// OpenProfileStore binds to ProfileBucket, creating it (file storage,
// replicas copies, at most ProfileStoreMaxBytes, objects kept for
// ProfileStoreMaxAge) or bringing an existing one to those limits; a caller
// not allowed to change the bucket binds to it as it is.
func OpenProfileStore(ctx context.Context, js jetstream.JetStream, replicas int) (*ProfileStore, error) {
	os, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      ProfileBucket,
		Description: "colocd training profiles, by content (sha256)",
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		MaxBytes:    ProfileStoreMaxBytes,
		TTL:         ProfileStoreMaxAge,
	})
	if err != nil {
		if bound, berr := js.ObjectStore(ctx, ProfileBucket); berr == nil {
			return &ProfileStore{os: bound}, nil
		}
		return nil, fmt.Errorf("open object store %s: %w", ProfileBucket, err)
	}
	return &ProfileStore{os: os}, nil
}

// Put stores raw under its reference, unless it is already there and was
// written less than half of ProfileStoreMaxAge ago, and returns the
// reference.
func (s *ProfileStore) Put(ctx context.Context, raw []byte) (string, error) {
	ref := v1.ProfileRef(raw)
	if uint64(len(raw)) > maxProfileBytes {
		return "", fmt.Errorf("put profile %s: %d bytes: want at most %d: %w", ref, len(raw), maxProfileBytes, ErrProfileTooLarge)
	}
	if info, err := s.os.GetInfo(ctx, ref); err == nil && time.Since(info.ModTime) < ProfileStoreMaxAge/2 {
		return ref, nil
	} else if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", fmt.Errorf("put profile %s: %w", ref, err)
	}
	if _, err := s.os.PutBytes(ctx, ref, raw); err != nil {
		return "", fmt.Errorf("put profile %s: %w", ref, err)
	}
	return ref, nil
}

// Has reports whether the bucket holds a profile named ref that was
// written less than half of ProfileStoreMaxAge ago (an older one is due to
// be written again).
func (s *ProfileStore) Has(ctx context.Context, ref string) (bool, error) {
	if _, err := v1.ParseProfileRef(ref); err != nil {
		return false, err
	}
	info, err := s.os.GetInfo(ctx, ref)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("profile %s: %w", ref, err)
	}
	return time.Since(info.ModTime) < ProfileStoreMaxAge/2, nil
}

// Get returns the bytes of the profile ref names: ErrProfileNotFound when
// there is none, an error when what is stored does not hash to ref.
func (s *ProfileStore) Get(ctx context.Context, ref string) ([]byte, error) {
	if _, err := v1.ParseProfileRef(ref); err != nil {
		return nil, err
	}
	info, err := s.os.GetInfo(ctx, ref)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("profile_ref: no profile %s in object store %s (put it there first, or send the profile inline): %w", ref, ProfileBucket, ErrProfileNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get profile %s: %w", ref, err)
	}
	if info.Size > maxProfileBytes {
		return nil, fmt.Errorf("profile_ref: the profile %s is %d bytes: want at most %d: %w", ref, info.Size, maxProfileBytes, ErrProfileTooLarge)
	}
	// The size in the object's info is what its writer claimed: read no
	// more than the bound, whatever the chunks hold.
	obj, err := s.os.Get(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("get profile %s: %w", ref, err)
	}
	defer obj.Close()
	raw, err := io.ReadAll(io.LimitReader(obj, int64(maxProfileBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("get profile %s: %w", ref, err)
	}
	if uint64(len(raw)) > maxProfileBytes {
		return nil, fmt.Errorf("profile_ref: the profile %s is over %d bytes: %w", ref, maxProfileBytes, ErrProfileTooLarge)
	}
	if got := v1.ProfileRef(raw); !bytes.Equal([]byte(got), []byte(ref)) {
		return nil, fmt.Errorf("profile_ref: the object %s in %s hashes to %s: it was not stored by its content (put it again): %w", ref, ProfileBucket, got, ErrProfileCorrupt)
	}
	return raw, nil
}
