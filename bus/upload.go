package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/termtext"
)

// A launcher cannot write the profile store: it adds a profile through a
// sidecar instead, in chunks on colocd.v1.<id>.profile. The sidecar
// reassembles them (ProfileUploads), checks that the bytes hash to the
// reference and parse as a profile, and stores them with its own identity.
// What a launcher can do there is bounded: one profile of at most
// MaxProfileBytes per upload, a few uploads at a time, each forgotten when
// idle.

// Headers of a profile upload chunk; the body is the chunk's bytes.
const (
	// HeaderProfileRef names the profile: "sha256:<hex>" of all its bytes.
	HeaderProfileRef = "Colocd-Profile-Ref"
	// HeaderProfileSize is the profile's total size in bytes.
	HeaderProfileSize = "Colocd-Profile-Size"
	// HeaderProfileOffset is where the chunk starts in the profile.
	HeaderProfileOffset = "Colocd-Profile-Offset"
)

// ProfileChunkBytes is the size of the chunks Client.PutProfile sends: well
// inside NATS's default 1 MiB message limit.
const ProfileChunkBytes = 256 << 10

// Limits of ProfileUploads.
const (
	// MaxProfileUploads is how many profiles a sidecar reassembles at once.
	MaxProfileUploads = 8
	// MaxTenantUploads is how many of them one launcher identity may have
	// in progress.
	MaxTenantUploads = 2
	// MinUploadRate is the bytes a second below which an upload, once
	// UploadGrace old, gives its place to a new one when all are taken: a
	// launcher that trickles bytes cannot hold the places.
	MinUploadRate = 64 << 10
	UploadGrace   = 5 * time.Second
	// ProfileUploadIdle is how long an unfinished upload is kept without a
	// new chunk.
	ProfileUploadIdle = time.Minute
)

// ProfileUpload is the answer to a chunk: how many bytes the sidecar holds,
// and the reference once the profile is complete and stored.
type ProfileUpload struct {
	// Received is the number of bytes received so far; the next chunk
	// starts there.
	Received int `json:"received"`
	// ProfileRef is set when the profile is complete and stored.
	ProfileRef string `json:"profile_ref,omitempty"`
}

// ProfileChunk is one chunk as the sidecar receives it.
type ProfileChunk struct {
	// Tenant is who sent it (Tenant); an upload is its sender's alone.
	Tenant string
	Ref    string
	Size   int
	Offset int
	Data   []byte
}

// ParseProfileChunk reads a chunk's headers; the error (a 400) names the
// header and what was expected.
func ParseProfileChunk(h map[string][]string, data []byte) (ProfileChunk, error) {
	get := func(k string) string {
		if v := h[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	c := ProfileChunk{Ref: get(HeaderProfileRef), Data: data}
	if _, err := v1.ParseProfileRef(c.Ref); err != nil {
		return c, v1.BadRequest(HeaderProfileRef + " header: " + err.Error())
	}
	var err error
	if c.Size, err = strconv.Atoi(get(HeaderProfileSize)); err != nil || c.Size < 1 || uint64(c.Size) > maxProfileBytes {
		return c, v1.BadRequest(fmt.Sprintf("%s header: want a size in bytes from 1 to %d, got %q", HeaderProfileSize, maxProfileBytes, termtext.Clip(get(HeaderProfileSize))))
	}
	if c.Offset, err = strconv.Atoi(get(HeaderProfileOffset)); err != nil || c.Offset < 0 || c.Offset >= c.Size {
		return c, v1.BadRequest(fmt.Sprintf("%s header: want an offset from 0 to %d, got %q", HeaderProfileOffset, c.Size-1, termtext.Clip(get(HeaderProfileOffset))))
	}
	if len(data) == 0 || len(data) > c.Size-c.Offset {
		return c, v1.BadRequest(fmt.Sprintf("profile chunk: want 1 to %d bytes at offset %d of %d, got %d", c.Size-c.Offset, c.Offset, c.Size, len(data)))
	}
	return c, nil
}

// ErrUploadsBusy: MaxProfileUploads uploads are in progress (a 503: retry).
var ErrUploadsBusy = errors.New("profile uploads busy")

// ProfileUploads reassembles profile uploads. It is safe for concurrent use.
type ProfileUploads struct {
	now func() time.Time

	mu      sync.Mutex
	pending map[string]*upload // by ref
}

type upload struct {
	tenant string
	size   int
	buf    []byte
	start  time.Time
	last   time.Time
}

// uploadKey is an upload's place in the map: its sender's and its
// reference, so that no launcher starts another's upload over.
func uploadKey(c ProfileChunk) string { return c.Tenant + "\x00" + c.Ref }

// NewProfileUploads returns an empty reassembler; now is the clock (nil:
// time.Now).
func NewProfileUploads(now func() time.Time) *ProfileUploads {
	if now == nil {
		now = time.Now
	}
	return &ProfileUploads{now: now, pending: map[string]*upload{}}
}

// Add takes a chunk. It returns the bytes received so far and, when they
// are complete and hash to the reference, the whole profile (and forgets
// the upload). Chunks must come in order: one at another offset is a 409
// whose message gives the offset expected, except that one at offset 0
// starts the upload over; a size that changes, or bytes
// that do not hash to the reference, a 400 (the upload starts over).
func (u *ProfileUploads) Add(c ProfileChunk) (received int, raw []byte, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	for k, p := range u.pending {
		if now.Sub(p.last) > ProfileUploadIdle {
			delete(u.pending, k)
		}
	}
	key := uploadKey(c)
	p := u.pending[key]
	if p != nil && c.Offset == 0 {
		p = nil // a chunk at offset 0 starts the upload over (a retry)
	}
	if p == nil {
		if c.Offset != 0 {
			return 0, nil, v1.Conflict(fmt.Sprintf("profile upload %s: no upload in progress: start at offset 0", c.Ref))
		}
		if _, restart := u.pending[key]; !restart {
			if err := u.makeRoomLocked(c, now); err != nil {
				return 0, nil, err
			}
		}
		p = &upload{tenant: c.Tenant, size: c.Size, buf: make([]byte, 0, min(c.Size, 2*ProfileChunkBytes)), start: now}
		u.pending[key] = p
	}
	switch {
	case c.Size != p.size:
		delete(u.pending, key)
		return 0, nil, v1.BadRequest(fmt.Sprintf("%s header: %d, but the upload of %s began with %d: start again", HeaderProfileSize, c.Size, c.Ref, p.size))
	case c.Offset != len(p.buf):
		return len(p.buf), nil, v1.Conflict(fmt.Sprintf("profile upload %s: chunk at offset %d, want offset %d", c.Ref, c.Offset, len(p.buf)))
	}
	p.buf = append(p.buf, c.Data...)
	p.last = now
	if len(p.buf) < p.size {
		return len(p.buf), nil, nil
	}
	delete(u.pending, key)
	sum := sha256.Sum256(p.buf)
	if got := v1.ProfileRefPrefix + hex.EncodeToString(sum[:]); got != c.Ref {
		return 0, nil, v1.BadRequest(fmt.Sprintf("profile upload: the bytes hash to %s, not %s: start again", got, c.Ref))
	}
	return len(p.buf), p.buf, nil
}

// makeRoomLocked finds a place for c's new upload: within its sender's
// share, and, when every place is taken, in place of the slowest upload
// that is past UploadGrace and below MinUploadRate.
func (u *ProfileUploads) makeRoomLocked(c ProfileChunk, now time.Time) error {
	mine := 0
	for _, p := range u.pending {
		if p.tenant == c.Tenant {
			mine++
		}
	}
	if mine >= MaxTenantUploads {
		return v1.Unavailable(fmt.Sprintf("profile upload %s: this launcher has %d uploads in progress, its share: finish one first: %v", c.Ref, mine, ErrUploadsBusy))
	}
	if len(u.pending) < MaxProfileUploads {
		return nil
	}
	slowest, rate := "", float64(MinUploadRate)
	for k, p := range u.pending {
		age := now.Sub(p.start)
		if age < UploadGrace {
			continue
		}
		if r := float64(len(p.buf)) / age.Seconds(); r < rate {
			slowest, rate = k, r
		}
	}
	if slowest == "" {
		return v1.Unavailable(fmt.Sprintf("profile upload %s: %d uploads in progress, the most a sidecar takes: retry shortly: %v", c.Ref, MaxProfileUploads, ErrUploadsBusy))
	}
	delete(u.pending, slowest) // its next chunk is a 409: it starts again
	return nil
}

// Forget drops tenant's upload of ref, if one is in progress.
func (u *ProfileUploads) Forget(tenant, ref string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.pending, uploadKey(ProfileChunk{Tenant: tenant, Ref: ref}))
}

// Pending returns how many uploads are in progress.
func (u *ProfileUploads) Pending() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.pending)
}
