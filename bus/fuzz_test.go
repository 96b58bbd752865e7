package bus

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// Every decoder of outside input must either succeed or return a 400, never
// panic; what decodes must encode and decode again to the same value.

var fuzzSeeds = []string{
	"", "{}", "null", "[]", `{"job":`, `{} {}`, `{"a":1}`, "\xff\xfe",
	admitExample,
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
			if CodeOf(err) != CodeBadRequest {
				t.Fatalf("error %v has code %d, want 400", err, CodeOf(err))
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

func FuzzDecodeAdmitRequest(f *testing.F)    { fuzzDecoder(f, DecodeAdmitRequest) }
func FuzzDecodeLeaseRef(f *testing.F)        { fuzzDecoder(f, DecodeLeaseRef) }
func FuzzDecodeRegisterRequest(f *testing.F) { fuzzDecoder(f, DecodeRegisterRequest) }
func FuzzDecodeEvent(f *testing.F)           { fuzzDecoder(f, DecodeEvent) }
func FuzzDecodeWatchRequest(f *testing.F)    { fuzzDecoder(f, DecodeWatchRequest) }

// JobToken must give a valid subject token, different for different ids.
func FuzzJobToken(f *testing.F) {
	for _, s := range []string{"job-1", "a.b", "*", ">", "a b", "=x", "ü", "team/job:7"} {
		f.Add(s, "job-1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, errA := JobToken(a)
		tb, errB := JobToken(b)
		if errA == nil {
			if err := ValidateSidecarID(ta); err != nil && len(ta) <= maxSidecarIDLen {
				t.Fatalf("token %q of %q is not a subject token: %v", ta, a, err)
			}
			for _, c := range []byte(ta) {
				if !isPlainByte(c) && c != '=' {
					t.Fatalf("token %q of %q has byte %q", ta, a, c)
				}
			}
		}
		if errA == nil && errB == nil && a != b && ta == tb {
			t.Fatalf("ids %q and %q share token %q", a, b, ta)
		}
	})
}

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
	fuzzDigest(f, "profile_ref", ProfileRefPrefix, ParseProfileRef,
		"", "sha256:", ProfileRef(nil), ProfileRef([]byte("x")), "sha256:"+string(make([]byte, 64)), "SHA256:00")
}

func FuzzParseTokenSHA256(f *testing.F) {
	fuzzDigest(f, "token_sha256", "", ParseTokenSHA256,
		"", TokenSHA256("x"), strings.ToUpper(TokenSHA256("x")), TokenSHA256("x")[:63]+"g", TokenSHA256("y")+"0")
}

// FuzzParseProfileChunk: any chunk headers and body either parse or are a 400
// naming a header, and a reassembler fed parsed chunks never holds more
// than the size the upload declared, nor returns bytes that do not hash to
// the reference.
func FuzzParseProfileChunk(f *testing.F) {
	f.Add("sha256:"+strings.Repeat("0", 64), "10", "0", []byte("0123456789"))
	f.Add(ProfileRef([]byte("abc")), "3", "0", []byte("abc"))
	f.Add(ProfileRef([]byte("abc")), "3", "1", []byte("bc"))
	f.Add("sha256:x", "-1", "9999999999999999999", []byte{})
	f.Add(ProfileRef([]byte("abc")), " 3", "+0", []byte("abcd"))
	f.Fuzz(func(t *testing.T, ref, size, offset string, data []byte) {
		c, err := ParseProfileChunk(map[string][]string{HeaderProfileRef: {ref}, HeaderProfileSize: {size}, HeaderProfileOffset: {offset}}, data)
		if err != nil {
			if CodeOf(err) != CodeBadRequest || !strings.Contains(err.Error(), "Colocd-Profile-") && !strings.Contains(err.Error(), "profile chunk") {
				t.Fatalf("error %v (code %d): want a 400 naming the header", err, CodeOf(err))
			}
			return
		}
		u := NewProfileUploads(nil)
		n, raw, err := u.Add(c)
		if err != nil {
			if code := CodeOf(err); code != CodeBadRequest && code != CodeConflict {
				t.Fatalf("add: %v (code %d)", err, code)
			}
			return
		}
		if n > c.Size || (raw != nil && ProfileRef(raw) != c.Ref) {
			t.Fatalf("received %d of %d; whole %d bytes for %s", n, c.Size, len(raw), c.Ref)
		}
	})
}

// The tenant of any header: never empty, never longer than the bound, and
// the fast scan agrees with decoding the header whenever it answers.
func FuzzTenant(f *testing.F) {
	f.Add(`{"acc":"COLOCD_LAUNCHERS","user":"UABCDEF","name":"x"}`)
	f.Add(`{"acc":"A","name":"x\",\"user\":\"UVICTIM"}`)
	f.Add(`{"user":"a\u0041"}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, v string) {
		h := nats.Header{}
		h.Set(RequestInfoHeader, v)
		got := Tenant(h)
		if got == "" || len(got) > maxTenantLen+len("account:") {
			t.Fatalf("Tenant(%q) = %q", v, got)
		}
		if u, ok := scanUser(v); ok {
			var ci struct {
				User string `json:"user"`
			}
			if err := json.Unmarshal([]byte(v), &ci); err == nil && ci.User != u {
				t.Fatalf("scan %q, decode %q of %q", u, ci.User, v)
			}
		}
	})
}
