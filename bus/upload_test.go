package bus

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go"
)

func chunkHeaders(ref string, size, offset int) map[string][]string {
	return map[string][]string{HeaderProfileRef: {ref}, HeaderProfileSize: {strconv.Itoa(size)}, HeaderProfileOffset: {strconv.Itoa(offset)}}
}

// sendAll uploads raw in chunks of n bytes and returns what Add returned last.
func sendAll(t *testing.T, u *ProfileUploads, raw []byte, n int) ([]byte, error) {
	t.Helper()
	ref := v1.ProfileRef(raw)
	for off := 0; off < len(raw); off += n {
		c, err := ParseProfileChunk(chunkHeaders(ref, len(raw), off), raw[off:min(off+n, len(raw))])
		if err != nil {
			return nil, err
		}
		got, whole, err := u.Add(c)
		if err != nil {
			return nil, err
		}
		if whole != nil {
			return whole, nil
		}
		if got != min(off+n, len(raw)) {
			t.Fatalf("received %d after offset %d", got, off)
		}
	}
	return nil, nil
}

func TestProfileUploads(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	u := NewProfileUploads(func() time.Time { return now })
	raw := bytes.Repeat([]byte("profile-bytes "), 5000)
	whole, err := sendAll(t, u, raw, 4096)
	if err != nil || !bytes.Equal(whole, raw) || u.Pending() != 0 {
		t.Fatalf("upload: %d bytes, %v, %d pending", len(whole), err, u.Pending())
	}

	// Out of order: a 409 that names the offset expected.
	ref := v1.ProfileRef(raw)
	first, _ := ParseProfileChunk(chunkHeaders(ref, len(raw), 0), raw[:10])
	if _, _, err := u.Add(first); err != nil {
		t.Fatal(err)
	}
	skip, _ := ParseProfileChunk(chunkHeaders(ref, len(raw), 20), raw[20:30])
	if _, _, err := u.Add(skip); v1.CodeOf(err) != v1.CodeConflict || !strings.Contains(err.Error(), "want offset 10") {
		t.Errorf("a chunk out of order: %v", err)
	}
	// A chunk at offset 0 starts it over (a launcher retrying), and the
	// upload then completes.
	if whole, err := sendAll(t, u, raw, 4096); err != nil || !bytes.Equal(whole, raw) {
		t.Errorf("an upload started over: %d bytes, %v", len(whole), err)
	}
	// Bytes that do not hash to the reference: a 400.
	other := bytes.Repeat([]byte("x"), 100)
	lie, _ := ParseProfileChunk(chunkHeaders(v1.ProfileRef([]byte("something else")), 100, 0), other)
	if _, _, err := u.Add(lie); v1.CodeOf(err) != v1.CodeBadRequest || !strings.Contains(err.Error(), "hash to") {
		t.Errorf("bytes with another hash: %v", err)
	}
	// At most MaxProfileUploads at once; idle ones are forgotten.
	for i := range MaxProfileUploads {
		r := []byte(strings.Repeat("y", 100+i))
		c, _ := ParseProfileChunk(chunkHeaders(v1.ProfileRef(r), len(r), 0), r[:50])
		c.Tenant = "launcher-" + strconv.Itoa(i)
		if _, _, err := u.Add(c); err != nil && i < MaxProfileUploads-1 {
			t.Fatalf("upload %d: %v", i, err)
		} else if err != nil && v1.CodeOf(err) != v1.CodeUnavailable {
			t.Fatalf("upload %d: %v, want a 503", i, err)
		}
	}
	now = now.Add(2 * ProfileUploadIdle)
	if whole, err := sendAll(t, u, raw, len(raw)); err != nil || !bytes.Equal(whole, raw) {
		t.Errorf("after the idle uploads were forgotten: %v", err)
	}
}

func TestParseProfileChunkNamesTheHeader(t *testing.T) {
	t.Parallel()
	ref := v1.ProfileRef([]byte("x"))
	tests := []struct {
		name string
		h    map[string][]string
		data []byte
		want string
	}{
		{"no ref", map[string][]string{}, []byte("x"), HeaderProfileRef},
		{"size too big", chunkHeaders(ref, MaxProfileBytes+1, 0), []byte("x"), HeaderProfileSize},
		{"size zero", chunkHeaders(ref, 0, 0), []byte("x"), HeaderProfileSize},
		{"offset past the end", chunkHeaders(ref, 5, 5), []byte("x"), HeaderProfileOffset},
		{"negative offset", chunkHeaders(ref, 5, -1), []byte("x"), HeaderProfileOffset},
		{"chunk past the end", chunkHeaders(ref, 5, 3), []byte("xxx"), "profile chunk"},
		{"empty chunk", chunkHeaders(ref, 5, 0), nil, "profile chunk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProfileChunk(tt.h, tt.data)
			if v1.CodeOf(err) != v1.CodeBadRequest || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want a 400 naming %q", err, tt.want)
			}
		})
	}
}

// FuzzProfileUploads: whatever chunks arrive, memory stays bounded and a
// completed upload is exactly the bytes its reference names.
func FuzzProfileUploads(f *testing.F) {
	f.Add([]byte("hello profile"), 4, 0, 13, false)
	f.Add([]byte("abc"), 1, 2, 3, true)
	f.Fuzz(func(t *testing.T, raw []byte, n, offset, size int, wrongRef bool) {
		u := NewProfileUploads(nil)
		ref := v1.ProfileRef(raw)
		if wrongRef {
			ref = v1.ProfileRef(append([]byte("x"), raw...))
		}
		if n < 1 {
			n = 1
		}
		if offset < 0 || offset > len(raw) {
			offset = len(raw) // the headers are fuzzed below through size
		}
		for off := offset; off < len(raw); off += n {
			c, err := ParseProfileChunk(chunkHeaders(ref, size, off), raw[off:min(off+n, len(raw))])
			if err != nil {
				return
			}
			_, whole, err := u.Add(c)
			if err != nil {
				return
			}
			if whole != nil && v1.ProfileRef(whole) != ref {
				t.Fatalf("completed %d bytes that do not hash to %s", len(whole), ref)
			}
			if u.Pending() > MaxProfileUploads {
				t.Fatalf("%d uploads pending", u.Pending())
			}
		}
	})
}

// storedHandler is fakeHandler with a profile store: it holds what was put.
type storedHandler struct {
	*fakeHandler
	mu     sync.Mutex
	stored map[string]int // ref → puts
}

func (h *storedHandler) HasProfile(_ context.Context, ref string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stored[ref] > 0, nil
}

func (h *storedHandler) PutProfile(_ context.Context, raw []byte) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ref := v1.ProfileRef(raw)
	h.stored[ref]++
	return ref, nil
}

// TestUploadProfile: Client.UploadProfile sends a profile in chunks that
// fit in a message, the service reassembles and hands it whole to the
// handler once, and an upload of a profile the sidecar holds stops at the
// first chunk.
func TestUploadProfile(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	h := &storedHandler{fakeHandler: newFakeHandler(), stored: map[string]int{}}
	serve(t, e, "gpu-a", h)
	c := NewClient(connect(t, e))
	raw := bytes.Repeat([]byte(`{"name":"k","dur_us":1.5},`), 3*ProfileChunkBytes/26) // three chunks and some
	ref, err := c.UploadProfile(testCtx(t), "gpu-a", raw)
	if err != nil || ref != v1.ProfileRef(raw) {
		t.Fatalf("upload: %q, %v", ref, err)
	}
	if _, err := c.UploadProfile(testCtx(t), "gpu-a", raw); err != nil {
		t.Fatal(err)
	}
	if n := h.stored[ref]; n != 1 {
		t.Errorf("the profile was put %d times, want once: the second upload stops at the first chunk", n)
	}
	if _, err := c.UploadProfile(testCtx(t), "gpu-a", nil); !errors.Is(err, ErrProfileTooLarge) {
		t.Errorf("an empty upload: %v", err)
	}
	if _, err := c.UploadProfile(testCtx(t), "gpu-b", raw); !errors.Is(err, v1.ErrNoSidecar) {
		t.Errorf("an upload to no sidecar: %v", err)
	}
	// Raw chunks with bad headers are refused by name.
	nc := connect(t, e)
	m := nats.NewMsg(v1.EndpointSubject("gpu-a", v1.EndpointProfile))
	m.Data = []byte("x")
	m.Header.Set(HeaderProfileRef, ref)
	m.Header.Set(HeaderProfileSize, "1e9")
	resp, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if e := responseError(resp); e == nil || e.Code != v1.CodeBadRequest || !strings.Contains(e.Description, HeaderProfileSize) {
		t.Errorf("a chunk with a bad size: %v", e)
	}
}

// One launcher holds at most its share of the upload places, and a
// launcher that trickles bytes gives its place up to a new upload once
// every place is taken.
func TestProfileUploadsShareAndMinimumRate(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	u := NewProfileUploads(func() time.Time { return now })
	start := func(tenant string, i int) error {
		r := []byte(strings.Repeat("z", 1000+i))
		c, _ := ParseProfileChunk(chunkHeaders(v1.ProfileRef(r), len(r), 0), r[:1])
		c.Tenant = tenant
		_, _, err := u.Add(c)
		return err
	}
	for i := range MaxTenantUploads {
		if err := start("hostile", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := start("hostile", 99); v1.CodeOf(err) != v1.CodeUnavailable || !strings.Contains(err.Error(), "share") {
		t.Errorf("past its share: %v, want a 503 naming the share", err)
	}
	// Others fill the rest, one byte each: every place taken.
	for i := MaxTenantUploads; i < MaxProfileUploads; i++ {
		if err := start("other-"+strconv.Itoa(i), i); err != nil {
			t.Fatal(err)
		}
	}
	if err := start("late", 200); v1.CodeOf(err) != v1.CodeUnavailable {
		t.Errorf("every place taken, none past its grace: %v, want a 503", err)
	}
	// Past the grace, all of them below the minimum rate: a new upload
	// takes the slowest's place, and the honest upload completes.
	now = now.Add(UploadGrace + time.Second)
	raw := bytes.Repeat([]byte("honest "), 3000)
	if whole, err := sendAll(t, u, raw, 4096); err != nil || !bytes.Equal(whole, raw) {
		t.Errorf("an upload while trickling uploads held every place: %v", err)
	}
}
