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
	h   hash.Hash
	buf []byte
	arr [256]byte // the first bytes of buf, so small keys allocate nothing
}

func (h *Hasher) grow() {
	if h.buf == nil {
		h.buf = h.arr[:0]
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
	h.grow()
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
	h.buf = append(h.buf, s...)
}

// Key writes another key (fixed width).
func (h *Hasher) Key(k Key) {
	h.grow()
	h.buf = append(h.buf, k[:]...)
}

// Sum returns the key of everything written. The Hasher is spent.
func (h *Hasher) Sum() (out Key) {
	if h.h == nil { // everything fits the buffer: one call, no hash.Hash
		return sha256.Sum256(h.buf)
	}
	h.flush()
	h.h.Sum(out[:0])
	return out
}
