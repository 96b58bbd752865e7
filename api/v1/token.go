package v1

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/colocd/colocd/internal/termtext"
)

// NewLeaseToken draws a lease token: 32 random bytes, base64url. A launcher
// keeps it and sends only TokenSHA256(token) in its admit.
func NewLeaseToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand, Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// TokenSHA256 returns the lower-case hex SHA-256 of token, as an admit's
// token_sha256 carries it.
func TokenSHA256(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ParseTokenSHA256 checks an admit's token_sha256 and returns the digest.
// The error names the field and what was expected.
func ParseTokenSHA256(s string) ([32]byte, error) {
	var d [32]byte
	if len(s) != 2*len(d) || strings.ToLower(s) != s {
		return d, fmt.Errorf("token_sha256: want 64 lower-case hex digits, the SHA-256 of a lease token of at least 128 bits that the launcher keeps, got %q", termtext.Clip(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("token_sha256: want 64 lower-case hex digits, the SHA-256 of a lease token of at least 128 bits that the launcher keeps, got %q", termtext.Clip(s))
	}
	return d, nil
}

// Prepare draws what a new admit needs and r lacks: a request_id, so that a
// retry of the same r is the same request, and a lease token, kept in r
// (Token) while only its SHA-256 travels.
func (r *AdmitRequest) Prepare() {
	if r.RequestID == "" {
		r.RequestID = rand.Text() // 26 base32 characters: 130 bits
	}
	if r.TokenSHA256 == "" {
		r.token = NewLeaseToken()
		r.TokenSHA256 = TokenSHA256(r.token)
	}
}

// Token is the lease token of r: the one Client.Admit drew, or the one
// WithToken gave ("" before either).
func (r *AdmitRequest) Token() string { return r.token }

// WithToken makes r use token, the one an earlier try of the same admit
// used (its outcome unknown, ErrNoAnswer): with the same request_id the
// sidecar returns that try's decision. The error names the field.
func (r *AdmitRequest) WithToken(token string) error {
	if len(token) < 22 || strings.ContainsAny(token, " \t\r\n") {
		return fmt.Errorf("token: want the lease token of the earlier try (at least 22 characters, no spaces), got %d characters", len(token))
	}
	r.token, r.TokenSHA256 = token, TokenSHA256(token)
	return nil
}
