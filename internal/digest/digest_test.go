package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestSumIsSHA256OfTheEncoding: the key is the SHA-256 of the documented
// encoding, whether the bytes stayed in the buffer or were flushed.
func TestSumIsSHA256OfTheEncoding(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 30, 2000} { // 2000 strings of 12 bytes cross flushAt
		var h Hasher
		var want []byte
		for i := range n {
			s := strings.Repeat("x", i%5)
			h.String(s)
			want = binary.LittleEndian.AppendUint64(want, uint64(len(s)))
			want = append(want, s...)
			h.Float64(float64(i))
			want = binary.LittleEndian.AppendUint64(want, math.Float64bits(float64(i)))
		}
		if got := h.Sum(); got != Key(sha256.Sum256(want)) {
			t.Errorf("%d values: key differs from sha256 of the encoding", n)
		}
	}
}

// TestUnambiguous: values that would join to the same bytes without length
// prefixes or presence flags give different keys.
func TestUnambiguous(t *testing.T) {
	t.Parallel()
	one := 1.0
	cases := []struct {
		name string
		a, b func(*Hasher)
	}{
		{"string boundary", func(h *Hasher) { h.String("ab"); h.String("c") }, func(h *Hasher) { h.String("a"); h.String("bc") }},
		{"absent vs zero", func(h *Hasher) { h.OptFloat64(nil) }, func(h *Hasher) { zero := 0.0; h.OptFloat64(&zero) }},
		{"absent vs set", func(h *Hasher) { h.OptFloat64(nil); h.Float64(1) }, func(h *Hasher) { h.OptFloat64(&one) }},
		{"signed zero", func(h *Hasher) { h.Float64(0) }, func(h *Hasher) { h.Float64(math.Copysign(0, -1)) }},
	}
	for _, tc := range cases {
		var a, b Hasher
		tc.a(&a)
		tc.b(&b)
		if a.Sum() == b.Sum() {
			t.Errorf("%s: same key", tc.name)
		}
	}
}

func BenchmarkHasher(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var h Hasher
		for i := range 10000 {
			h.Float64(float64(i))
		}
		_ = h.Sum()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/value")
}
