package bus

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"
)

func TestProfileStore(t *testing.T) {
	// Not parallel: it lowers the package's maxProfileBytes.
	e := startServer(t)
	js := jetStreamOf(t, e)
	ctx := testCtx(t)
	st, err := OpenProfileStore(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenProfileStore(ctx, js, 1); err != nil { // a second sidecar binds to the same bucket
		t.Fatalf("reopen: %v", err)
	}
	// The bucket is bounded in size and age.
	str, err := js.Stream(ctx, "OBJ_"+ProfileBucket)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := str.CachedInfo().Config; cfg.MaxBytes != ProfileStoreMaxBytes || cfg.MaxAge != ProfileStoreMaxAge {
		t.Errorf("bucket limits: %d bytes, age %v; want %d, %v", cfg.MaxBytes, cfg.MaxAge, ProfileStoreMaxBytes, ProfileStoreMaxAge)
	}
	raw := []byte(`{"format":"colocd.profile/v1","name":"p","kind":"training","summary":{"iteration_ms":10,"gpu_util":0.5}}`)
	ref, err := st.Put(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if ref != v1.ProfileRef(raw) || !strings.HasPrefix(ref, "sha256:") || len(ref) != len("sha256:")+64 {
		t.Fatalf("ref %q", ref)
	}
	if again, err := st.Put(ctx, raw); err != nil || again != ref {
		t.Fatalf("second put: %q, %v", again, err)
	}
	if ok, err := st.Has(ctx, ref); !ok || err != nil {
		t.Errorf("has a profile just put: %v, %v", ok, err)
	}
	if ok, err := st.Has(ctx, v1.ProfileRef([]byte("never put"))); ok || err != nil {
		t.Errorf("has a profile never put: %v, %v", ok, err)
	}
	got, err := st.Get(ctx, ref)
	if err != nil || string(got) != string(raw) {
		t.Fatalf("get: %q, %v", got, err)
	}
	missing := v1.ProfileRef([]byte("another"))
	if _, err := st.Get(ctx, missing); !errors.Is(err, ErrProfileNotFound) || !strings.Contains(err.Error(), "put it there first") {
		t.Errorf("get of a missing profile: %v", err)
	}
	if _, err := st.Get(ctx, "sha256:nothex"); err == nil || !strings.Contains(err.Error(), "profile_ref: want") {
		t.Errorf("get of a malformed ref: %v", err)
	}
	// An object put under a name that is not its digest (by hand, not by
	// Put) is refused on read.
	obs, err := js.ObjectStore(ctx, ProfileBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, missing, raw); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, missing); !errors.Is(err, ErrProfileCorrupt) || !strings.Contains(err.Error(), "not stored by its content") {
		t.Errorf("get of a mislabelled object: %v", err)
	}
	// Size: a put above the limit is refused before it is sent, and an
	// object above it (put by hand) is not read.
	defer func(old uint64) { maxProfileBytes = old }(maxProfileBytes)
	maxProfileBytes = uint64(len(raw) - 1)
	if _, err := st.Put(ctx, append([]byte(" "), raw...)); !errors.Is(err, ErrProfileTooLarge) {
		t.Errorf("put above the limit: %v", err)
	}
	if _, err := st.Get(ctx, ref); !errors.Is(err, ErrProfileTooLarge) || !strings.Contains(err.Error(), "want at most") {
		t.Errorf("get above the limit: %v", err)
	}
}

func TestParseProfileRef(t *testing.T) {
	t.Parallel()
	good := v1.ProfileRef([]byte("x"))
	if d, err := v1.ParseProfileRef(good); err != nil || v1.ProfileRefPrefix+hex.EncodeToString(d[:]) != good {
		t.Errorf("ParseProfileRef(%q) = %x, %v", good, d, err)
	}
	hexPart := strings.TrimPrefix(good, "sha256:")
	for _, ref := range []string{
		"", hexPart, "sha512:" + hexPart, good[:len(good)-1], good + "0",
		strings.ToUpper(good[:7]) + good[7:], "sha256:" + strings.ToUpper(hexPart),
		"sha256:" + strings.Repeat("g", 64), "sha256:" + strings.Repeat("0", 63) + "\n",
	} {
		if _, err := v1.ParseProfileRef(ref); err == nil || !strings.HasPrefix(err.Error(), "profile_ref: want") {
			t.Errorf("ParseProfileRef(%q) = %v, want an error naming the field", ref, err)
		}
	}
}
