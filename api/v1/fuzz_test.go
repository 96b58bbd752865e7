package v1_test

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/wiretest"
)

// Every decoder of outside input must either succeed or return a 400, never
// panic; what decodes must encode and decode again to the same value.

var fuzzSeeds = []string{
	"", "{}", "null", "[]", `{"job":`, `{} {}`, `{"a":1}`, "\xff\xfe",
	wiretest.AdmitExample,
	`{"lease_id":"l-1","token":"t"}`,
	`{"lease_id":"l-1","token":"t","pids":[1,2,3]}`,
	`{"type":"revoke","lease_id":"l","job_id":"j","reason":"gpu xid 79","time":"2026-03-01T12:00:00Z"}`,
	`{"job_id":"job-1","from_seq":7}`, `{"since":"2026-03-01T12:00:00Z"}`, `{"from_seq":1,"since":"2026-03-01T12:00:00Z"}`,
	`{"compute":{"min_pct":-1e400}}`, `{"pids":[1e30]}`, `{"profile":{"ops":[{}]}}`,
}

func fuzzDecoder[T any](f *testing.F, decode func([]byte) (*T, error)) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decode(data)
		if err != nil {
			if v1.CodeOf(err) != v1.CodeBadRequest {
				t.Fatalf("error %v has code %d, want 400", err, v1.CodeOf(err))
			}
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", v, err)
		}
		if _, err := decode(b); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
	})
}

func FuzzDecodeAdmitRequest(f *testing.F)    { fuzzDecoder(f, v1.DecodeAdmitRequest) }
func FuzzDecodeLeaseRef(f *testing.F)        { fuzzDecoder(f, v1.DecodeLeaseRef) }
func FuzzDecodeRegisterRequest(f *testing.F) { fuzzDecoder(f, v1.DecodeRegisterRequest) }
func FuzzDecodeEvent(f *testing.F)           { fuzzDecoder(f, v1.DecodeEvent) }
func FuzzDecodeWatchRequest(f *testing.F)    { fuzzDecoder(f, v1.DecodeWatchRequest) }

// fuzzDigest fuzzes parse, a parser of the hex SHA-256 digests that field
// carries, from seeds: an input either parses to the digest it spells
// (after prefix, and prints back to itself) or is refused with an error
// naming the field.
func fuzzDigest(f *testing.F, field, prefix string, parse func(string) ([32]byte, error), seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parse(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), field+": ") {
				t.Fatalf("error %q does not name the field", err)
			}
			return
		}
		if back := prefix + hex.EncodeToString(d[:]); back != s {
			t.Fatalf("%q parsed to %x, which prints as %q", s, d, back)
		}
	})
}

func FuzzParseProfileRef(f *testing.F) {
	fuzzDigest(f, "profile_ref", v1.ProfileRefPrefix, v1.ParseProfileRef,
		"", "sha256:", v1.ProfileRef(nil), v1.ProfileRef([]byte("x")), "sha256:"+string(make([]byte, 64)), "SHA256:00")
}

func FuzzParseTokenSHA256(f *testing.F) {
	fuzzDigest(f, "token_sha256", "", v1.ParseTokenSHA256,
		"", v1.TokenSHA256("x"), strings.ToUpper(v1.TokenSHA256("x")), v1.TokenSHA256("x")[:63]+"g", v1.TokenSHA256("y")+"0")
}
