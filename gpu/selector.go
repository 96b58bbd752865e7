package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxIndex is the largest GPU index a selector accepts.
const MaxIndex = 255

// Selector names one GPU: by index in NVML's enumeration (which is not
// necessarily CUDA's order) or by UUID, which survives reboots and
// re-enumeration. Exactly one of the two is set: UUID is "" for an index.
type Selector struct {
	Index int
	UUID  string
}

// IsUUID reports whether the selector names its GPU by UUID.
func (s Selector) IsUUID() bool { return s.UUID != "" }

// String returns the selector in the form ParseSelector reads.
func (s Selector) String() string {
	if s.IsUUID() {
		return s.UUID
	}
	return strconv.Itoa(s.Index)
}

// ParseSelector reads a device selector from configuration: a decimal GPU
// index from 0 to MaxIndex ("0", "3"), or a full GPU UUID as nvidia-smi -L
// prints it ("GPU-5e2c9f1a-…", 8-4-4-4-12 hex digits, any case; it is
// returned lower-cased, as NVML spells it). Surrounding spaces are ignored.
// MIG device UUIDs are rejected: colocd manages a whole GPU. Every error
// wraps ErrInvalidSelector.
func ParseSelector(s string) (Selector, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return Selector{}, selectorErr(s, "empty")
	case isDigits(t):
		if len(t) > 1 && t[0] == '0' {
			return Selector{}, selectorErr(s, "leading zero in a GPU index")
		}
		n, err := strconv.Atoi(t)
		if err != nil || n > MaxIndex {
			return Selector{}, selectorErr(s, fmt.Sprintf("GPU index above %d", MaxIndex))
		}
		return Selector{Index: n}, nil
	case hasPrefixFold(t, "MIG-"):
		return Selector{}, selectorErr(s, "a MIG device; give the whole GPU's index or UUID")
	case hasPrefixFold(t, "GPU-"):
		u := "GPU-" + strings.ToLower(t[len("GPU-"):])
		if !isUUIDBody(u[len("GPU-"):]) {
			return Selector{}, selectorErr(s, "a GPU UUID needs 8-4-4-4-12 hex digits after GPU-")
		}
		return Selector{UUID: u}, nil
	}
	return Selector{}, selectorErr(s, `neither a GPU index such as "0" nor a UUID such as "GPU-…"`)
}

func selectorErr(s, why string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidSelector, s, why)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// isUUIDBody checks lower-case 8-4-4-4-12 hex groups.
func isUUIDBody(s string) bool {
	groups := strings.Split(s, "-")
	want := []int{8, 4, 4, 4, 12}
	if len(groups) != len(want) {
		return false
	}
	for i, g := range groups {
		if len(g) != want[i] {
			return false
		}
		for j := 0; j < len(g); j++ {
			c := g[j]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}
