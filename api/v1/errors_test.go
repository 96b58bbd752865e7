package v1

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestCodeOf(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]int{
		nil:                       0,
		errors.New("x"):           CodeInternal,
		BadRequest("field \"x\""): CodeBadRequest,
		fmt.Errorf("renew: %w", Forbidden("token")): CodeForbidden,
		NotFound("lease"):                           CodeNotFound,
		Conflict("x"):                               CodeConflict,
		Unavailable("gpu"):                          CodeUnavailable,
		Timeout("deadline"):                         CodeTimeout,
		&Error{Description: "x"}:                    CodeInternal, // no code
		errors.Join(errors.New("a"), NotFound("b")): CodeNotFound,
	} {
		if got := CodeOf(err); got != want {
			t.Errorf("CodeOf(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestWireErrorRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      error
		code     string
		desc     string
		wantBack Error
	}{
		{"typed", Forbidden("wrong token"), "403", "wrong token", Error{Code: 403, Description: "wrong token"}},
		{"wrapped keeps the description", fmt.Errorf("ctx: %w", NotFound("lease l")), "404", "lease l", Error{Code: 404, Description: "lease l"}},
		{"plain", errors.New("disk\r\nfull"), "500", "disk  full", Error{Code: 500, Description: "disk  full"}},
		{"empty description", &Error{Code: 409}, "409", "error 409", Error{Code: 409, Description: "error 409"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, desc := WireError(tt.err)
			if code != tt.code || desc != tt.desc {
				t.Errorf("wireError = %q %q, want %q %q", code, desc, tt.code, tt.desc)
			}
			if diff := cmp.Diff(tt.wantBack, *ParseWireError(code, desc)); diff != "" {
				t.Errorf("parseWireError (-want +got):\n%s", diff)
			}
		})
	}
	if got := ParseWireError("teapot", "x"); got.Code != CodeInternal {
		t.Errorf("non-numeric code parsed as %d", got.Code)
	}
}

// An error that says a lot (a request with every field wrong) is cut to
// MaxErrorBytes on the wire, on a character boundary.
func TestWireErrorBounded(t *testing.T) {
	t.Parallel()
	long := BadRequest(strings.Repeat("é field: want x, got y; ", 5000))
	_, desc := WireError(long)
	if len(desc) > MaxErrorBytes+len("…") || !utf8.ValidString(desc) || !strings.HasSuffix(desc, "…") {
		t.Errorf("description of %d bytes (valid UTF-8 %v), want at most %d and cut with …", len(desc), utf8.ValidString(desc), MaxErrorBytes)
	}
}
