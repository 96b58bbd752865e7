package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/colocd/colocd/internal/termtext"
)

// ProfileRefPrefix starts every profile reference.
const ProfileRefPrefix = "sha256:"

// ProfileRef returns the reference of a profile's bytes: "sha256:" and the
// lower-case hex SHA-256 of exactly those bytes.
func ProfileRef(raw []byte) string {
	sum := sha256.Sum256(raw)
	return ProfileRefPrefix + hex.EncodeToString(sum[:])
}

// ParseProfileRef checks a reference and returns its digest. The error names
// the field and what was expected.
func ParseProfileRef(ref string) ([32]byte, error) {
	var d [32]byte
	h, ok := strings.CutPrefix(ref, ProfileRefPrefix)
	if !ok || len(h) != 2*len(d) || strings.ToLower(h) != h {
		return d, fmt.Errorf("profile_ref: want %q and 64 lower-case hex digits, got %q", ProfileRefPrefix, termtext.Clip(ref))
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		return d, fmt.Errorf("profile_ref: want %q and 64 lower-case hex digits, got %q", ProfileRefPrefix, termtext.Clip(ref))
	}
	return d, nil
}
