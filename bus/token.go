package bus

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
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
		return d, fmt.Errorf("token_sha256: want 64 lower-case hex digits, the SHA-256 of a lease token of at least 128 bits that the launcher keeps, got %q", clip(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("token_sha256: want 64 lower-case hex digits, the SHA-256 of a lease token of at least 128 bits that the launcher keeps, got %q", clip(s))
	}
	return d, nil
}
