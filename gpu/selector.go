package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxIndex is the largest GPU index a selector accepts.
const MaxIndex = 255

// MaxInstanceID is the largest GPU or compute instance id a selector
// accepts (NVML numbers a GPU's instances from 0, fewer than 8 of each on
// today's GPUs).
const MaxInstanceID = 63

// Selector names one GPU, or one MIG device of a GPU. A GPU is named by
// index in NVML's enumeration (which is not necessarily CUDA's order) or by
// UUID, which survives reboots and re-enumeration: UUID is "" for an index.
// A MIG device is named by its own UUID ("MIG-…", in UUID), or by its GPU
// and its GPU and compute instance ids (Instance set, with GI and CI).
type Selector struct {
	Index int
	UUID  string
	// Instance says that GI and CI name a MIG device of the GPU.
	Instance bool
	GI, CI   int
}

// IsUUID reports whether the selector names its GPU (or MIG device) by
// UUID.
func (s Selector) IsUUID() bool { return s.UUID != "" }

// IsMIG reports whether the selector names a MIG device.
func (s Selector) IsMIG() bool { return s.Instance || strings.HasPrefix(s.UUID, "MIG-") }

// String returns the selector in the form ParseSelector reads.
func (s Selector) String() string {
	gpu := strconv.Itoa(s.Index)
	if s.IsUUID() {
		gpu = s.UUID
	}
	if s.Instance {
		return fmt.Sprintf("%s:%d:%d", gpu, s.GI, s.CI)
	}
	return gpu
}

// ParseSelector reads a device selector from configuration:
//   - a decimal GPU index from 0 to MaxIndex ("0", "3");
//   - a full GPU UUID as nvidia-smi -L prints it ("GPU-5e2c9f1a-…",
//     8-4-4-4-12 hex digits, any case; it is returned lower-cased, as NVML
//     spells it);
//   - a MIG device's UUID as nvidia-smi -L prints it ("MIG-…", the same
//     digits);
//   - a MIG device as <gpu>:<gi>:<ci>: the GPU (index or UUID), then its GPU
//     instance id and compute instance id as nvidia-smi shows them
//     ("0:1:0"), each from 0 to MaxInstanceID. NVIDIA's own
//     MIG-GPU-<uuid>/<gi>/<ci> reads the same way.
//
// Surrounding spaces are ignored. Every error wraps ErrInvalidSelector.
func ParseSelector(s string) (Selector, error) {
	t := strings.TrimSpace(s)
	if hasPrefixFold(t, "MIG-GPU-") { // MIG-GPU-<uuid>/<gi>/<ci>, nothing else
		parts := strings.Split(t[len("MIG-GPU-"):], "/")
		if len(parts) != 3 || strings.Contains(t, ":") {
			return Selector{}, selectorErr(s, "NVIDIA's MIG form is MIG-GPU-<uuid>/<gi>/<ci>")
		}
		t = "GPU-" + strings.Join(parts, ":")
	}
	if gpu, rest, ok := strings.Cut(t, ":"); ok {
		if hasPrefixFold(gpu, "MIG-") {
			return Selector{}, selectorErr(s, "a MIG device UUID names the device itself: give it alone, or the GPU as <gpu>:<gi>:<ci>")
		}
		gi, ci, ok := strings.Cut(rest, ":")
		if !ok || strings.Contains(ci, ":") {
			return Selector{}, selectorErr(s, "a MIG device as <gpu>:<gi>:<ci> needs three parts, such as \"0:1:0\"")
		}
		sel, err := parseGPU(s, gpu)
		if err != nil {
			return Selector{}, err
		}
		if sel.GI, err = instanceID(s, "GPU instance", gi); err != nil {
			return Selector{}, err
		}
		if sel.CI, err = instanceID(s, "compute instance", ci); err != nil {
			return Selector{}, err
		}
		sel.Instance = true
		return sel, nil
	}
	if hasPrefixFold(t, "MIG-") {
		u := "MIG-" + strings.ToLower(t[len("MIG-"):])
		if !isUUIDBody(u[len("MIG-"):]) {
			return Selector{}, selectorErr(s, "a MIG device UUID needs 8-4-4-4-12 hex digits after MIG-")
		}
		return Selector{UUID: u}, nil
	}
	return parseGPU(s, t)
}

// parseGPU reads a whole GPU's index or UUID, t, from selector s.
func parseGPU(s, t string) (Selector, error) {
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
	case hasPrefixFold(t, "GPU-"):
		u := "GPU-" + strings.ToLower(t[len("GPU-"):])
		if !isUUIDBody(u[len("GPU-"):]) {
			return Selector{}, selectorErr(s, "a GPU UUID needs 8-4-4-4-12 hex digits after GPU-")
		}
		return Selector{UUID: u}, nil
	}
	return Selector{}, selectorErr(s, `neither a GPU index such as "0", a UUID such as "GPU-…" or "MIG-…", nor a MIG device such as "0:1:0"`)
}

// instanceID reads a GPU or compute instance id.
func instanceID(s, what, t string) (int, error) {
	if !isDigits(t) || len(t) > 1 && t[0] == '0' {
		return 0, selectorErr(s, fmt.Sprintf("the %s id must be a number without leading zeros", what))
	}
	n, err := strconv.Atoi(t)
	if err != nil || n > MaxInstanceID {
		return 0, selectorErr(s, fmt.Sprintf("%s id above %d", what, MaxInstanceID))
	}
	return n, nil
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
