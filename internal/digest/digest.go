// Package digest builds SHA-256 content keys from typed values, written
// unambiguously (fixed width, strings length-prefixed) so that two different
// inputs never share a key by how their fields happen to join.
package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
)

// Key is a SHA-256 digest.
type Key [32]byte

// flushAt is the buffered size that is hashed in one Write: a real profile is
// thousands of 8-byte values, and one Write each cost more than the hashing.
const flushAt = 8 << 10

// Hasher accumulates values into a key. The zero value is ready to use; it
// is not safe for concurrent use.
type Hasher struct {
	h hash.Hash
	// arr holds the first bytes (n of them) so that a small key needs no
	// heap: nothing in the Hasher points into itself, so one on the stack
	// stays there. Past len(arr), buf holds the bytes not yet hashed.
	arr [256]byte
	n   int
	buf []byte
}

// spill moves the bytes to buf, hashing them in flushAt chunks.
func (h *Hasher) spill() {
	if h.buf == nil {
		h.buf = append(make([]byte, 0, 2*len(h.arr)), h.arr[:h.n]...)
	}
	if len(h.buf) >= flushAt {
		h.flush()
	}
}

func (h *Hasher) flush() {
	if h.h == nil {
		h.h = sha256.New()
	}
	h.h.Write(h.buf)
	h.buf = h.buf[:0]
}

// Uint64 writes v.
func (h *Hasher) Uint64(v uint64) {
	if h.buf == nil && h.n+8 <= len(h.arr) {
		binary.LittleEndian.PutUint64(h.arr[h.n:], v)
		h.n += 8
		return
	}
	h.spill()
	h.buf = binary.LittleEndian.AppendUint64(h.buf, v)
}

// Int writes v.
func (h *Hasher) Int(v int) { h.Uint64(uint64(v)) }

// Float64 writes v's bits: -0 and 0, and every NaN payload, differ.
func (h *Hasher) Float64(v float64) { h.Uint64(math.Float64bits(v)) }

// Bool writes v as 0 or 1.
func (h *Hasher) Bool(v bool) {
	if v {
		h.Uint64(1)
	} else {
		h.Uint64(0)
	}
}

// OptFloat64 writes whether v is set, then *v.
func (h *Hasher) OptFloat64(v *float64) {
	h.Bool(v != nil)
	if v != nil {
		h.Float64(*v)
	}
}

// String writes s with its length first.
func (h *Hasher) String(s string) {
	h.Uint64(uint64(len(s)))
	h.write(s)
}

// Key writes another key (fixed width).
func (h *Hasher) Key(k Key) { h.write(string(k[:])) }

// write appends raw bytes.
func (h *Hasher) write(s string) {
	if h.buf == nil && h.n+len(s) <= len(h.arr) {
		h.n += copy(h.arr[h.n:], s)
		return
	}
	h.spill()
	h.buf = append(h.buf, s...)
}

// Sum returns the key of everything written. The Hasher is spent.
func (h *Hasher) Sum() (out Key) {
	switch {
	case h.buf == nil: // everything fits the array: one call, no hash.Hash
		return sha256.Sum256(h.arr[:h.n])
	case h.h == nil:
		return sha256.Sum256(h.buf)
	}
	h.flush()
	h.h.Sum(out[:0])
	return out
}
