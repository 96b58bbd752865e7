package bus

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go"
)

// FuzzParseProfileChunk: any chunk headers and body either parse or are a 400
// naming a header, and a reassembler fed parsed chunks never holds more
// than the size the upload declared, nor returns bytes that do not hash to
// the reference.
func FuzzParseProfileChunk(f *testing.F) {
	f.Add("sha256:"+strings.Repeat("0", 64), "10", "0", []byte("0123456789"))
	f.Add(v1.ProfileRef([]byte("abc")), "3", "0", []byte("abc"))
	f.Add(v1.ProfileRef([]byte("abc")), "3", "1", []byte("bc"))
	f.Add("sha256:x", "-1", "9999999999999999999", []byte{})
	f.Add(v1.ProfileRef([]byte("abc")), " 3", "+0", []byte("abcd"))
	f.Fuzz(func(t *testing.T, ref, size, offset string, data []byte) {
		c, err := ParseProfileChunk(map[string][]string{HeaderProfileRef: {ref}, HeaderProfileSize: {size}, HeaderProfileOffset: {offset}}, data)
		if err != nil {
			if v1.CodeOf(err) != v1.CodeBadRequest || !strings.Contains(err.Error(), "Colocd-Profile-") && !strings.Contains(err.Error(), "profile chunk") {
				t.Fatalf("error %v (code %d): want a 400 naming the header", err, v1.CodeOf(err))
			}
			return
		}
		u := NewProfileUploads(nil)
		n, raw, err := u.Add(c)
		if err != nil {
			if code := v1.CodeOf(err); code != v1.CodeBadRequest && code != v1.CodeConflict {
				t.Fatalf("add: %v (code %d)", err, code)
			}
			return
		}
		if n > c.Size || (raw != nil && v1.ProfileRef(raw) != c.Ref) {
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
