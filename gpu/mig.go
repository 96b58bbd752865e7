package gpu

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// MIGDevice identifies a MIG device (one compute instance of a GPU
// instance) that a sidecar guards. Info.MIG holds it; nil for a whole GPU.
type MIGDevice struct {
	// Name is NVML's name of the MIG device, e.g. "NVIDIA H200 MIG
	// 3g.71gb"; Profile the GPU instance profile in it ("3g.71gb"), "" when
	// the name does not end in one.
	Name, Profile string
	// ParentUUID is the whole GPU's UUID ("GPU-…").
	ParentUUID string
	// GI and CI are the GPU instance and compute instance ids.
	GI, CI int
	// Slices is the GPU instance's compute slices (of 7), ComputeSlices
	// the compute instance's.
	Slices, ComputeSlices int
	// MemorySlices is the GPU instance's memory slices (of
	// MIGMemorySlices): its share of the GPU's memory bandwidth and L2.
	// From the profile table when it knows the profile, else the
	// instance's memory over the GPU's, in eighths.
	MemorySlices int
	// GPUSMs is the whole GPU's SM count (the table's; 0 when the GPU is
	// not in it).
	GPUSMs int
}

// memorySlices is the memory slices of a GPU instance of profile on the GPU
// named gpuName: the table's, else mib of total in eighths (at least one).
func memorySlices(gpuName, profile string, mib, total uint64) int {
	if t, err := MIGProfiles(gpuName); err == nil {
		for _, p := range t {
			if p.Name == profile {
				return p.MemorySlices
			}
		}
	}
	if total == 0 {
		return MIGMemorySlices
	}
	n := int((mib*MIGMemorySlices + total/2) / total)
	return min(max(n, 1), MIGMemorySlices)
}

// MIGProfile is one GPU instance profile of a GPU model.
type MIGProfile struct {
	// Name is the profile as nvidia-smi names it, e.g. "3g.71gb".
	Name string
	// Slices is its compute slices (of 7); MemorySlices its memory slices
	// (of 8), which is also the size of its placements.
	Slices, MemorySlices int
	// SMs is the instance's streaming multiprocessors, MemoryMiB its
	// memory as the driver reports it.
	SMs       int
	MemoryMiB int
	// Starts are the memory slices where an instance of the profile may
	// begin.
	Starts []int
}

// migTables are the GPU instance profiles colocd knows, per GPU model (as
// smTable names them). docs/gpu.md#mig cites the sources: NVIDIA's MIG User
// Guide, "Supported MIG Profiles" (H200: Table 8) for the profiles, their
// slices and instance counts, and "Getting Started with MIG" for the
// placements; the SM counts and memory are a real H200's `nvidia-smi mig
// -lgip` (NVIDIA/mig-parted issue #120). SM counts are not slices × 16: a
// 1g.35gb has 26 and a 3g 60, and a 7g has all 132. The media-extension
// profile (1g.18gb+me) is left out.
var migTables = map[string][]MIGProfile{
	"h200": {
		{Name: "1g.18gb", Slices: 1, MemorySlices: 1, SMs: 16, MemoryMiB: 16384, Starts: []int{0, 1, 2, 3, 4, 5, 6}},
		{Name: "1g.35gb", Slices: 1, MemorySlices: 2, SMs: 26, MemoryMiB: 33024, Starts: []int{0, 2, 4, 6}},
		{Name: "2g.35gb", Slices: 2, MemorySlices: 2, SMs: 32, MemoryMiB: 33024, Starts: []int{0, 2, 4}},
		{Name: "3g.71gb", Slices: 3, MemorySlices: 4, SMs: 60, MemoryMiB: 71168, Starts: []int{0, 4}},
		{Name: "4g.71gb", Slices: 4, MemorySlices: 4, SMs: 64, MemoryMiB: 71168, Starts: []int{0}},
		{Name: "7g.141gb", Slices: 7, MemorySlices: 8, SMs: 132, MemoryMiB: 143360, Starts: []int{0}},
	},
}

// MIGMemorySlices is the number of memory slices a MIG GPU divides into.
const MIGMemorySlices = 8

// MIGProfiles returns the GPU instance profiles of the GPU named name (an
// NVML name, as SMCount reads it), smallest first. A GPU without a table
// returns an error wrapping ErrUnknownMIG.
func MIGProfiles(name string) ([]MIGProfile, error) {
	model, _, ok := parseDeviceName(name)
	if t, found := migTables[model]; ok && found {
		out := slices.Clone(t)
		for i := range out {
			out[i].Starts = slices.Clone(out[i].Starts)
		}
		return out, nil
	}
	var known []string
	for m := range migTables {
		known = append(known, strings.ToUpper(m))
	}
	slices.Sort(known)
	return nil, fmt.Errorf("%w for device %q: colocd has MIG profiles for %s", ErrUnknownMIG, name, strings.Join(known, ", "))
}

// migNameRe is the end of a MIG device's NVML name: an optional compute
// instance ("1c."), then the GPU instance profile ("3g.71gb", "1g.18gb+me").
var migNameRe = regexp.MustCompile(` MIG (?:[1-7]c\.)?([1-7]g\.[0-9]+gb(?:\+[a-z]+)?)$`)

// migProfileOf returns the GPU instance profile a MIG device name ends in:
// "NVIDIA H200 MIG 3g.71gb" → "3g.71gb"; "" when it ends in none.
func migProfileOf(name string) string {
	if m := migNameRe.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

// MIGPlacement is one GPU instance in a layout: its profile and the first
// memory slice it takes.
type MIGPlacement struct {
	Profile MIGProfile
	Start   int
}

// MIGLayout is a set of GPU instances that fit on one GPU together.
type MIGLayout []MIGPlacement

// Names lists the layout's profiles, largest first: "4g.71gb+3g.71gb".
func (l MIGLayout) Names() string {
	names := make([]string, len(l))
	for i, p := range l {
		names[i] = p.Profile.Name
	}
	return strings.Join(names, "+")
}

// MIGLayouts returns the GPU's maximal MIG layouts: sets of placements that
// share no memory slice, to which no further instance fits. Layouts with the
// same profiles in other places are one layout (the first the walk finds,
// not necessarily at the lowest starts): they perform alike. A layout whose
// profiles are a subset of another's is kept when no instance fits beside
// it where it sits. Each layout lists its
// instances largest first; the layouts come in the order of their profile
// lists. The instance counts of NVIDIA's tables follow from the slices: no
// more than 7 compute slices are ever used, since only profiles with fewer
// compute than memory slices reach the eighth memory slice.
func MIGLayouts(profiles []MIGProfile) []MIGLayout {
	type cand struct {
		p     int // index into profiles
		start int
	}
	var cands []cand
	for i, p := range profiles {
		for _, s := range p.Starts {
			cands = append(cands, cand{i, s})
		}
	}
	fits := func(used uint, c cand) bool {
		mask := uint(1)<<profiles[c.p].MemorySlices - 1
		return used&(mask<<c.start) == 0 && c.start+profiles[c.p].MemorySlices <= MIGMemorySlices
	}
	seen := map[string]bool{}
	var out []MIGLayout
	var walk func(from int, used uint, chosen []cand)
	walk = func(from int, used uint, chosen []cand) {
		maximal := true
		for _, c := range cands {
			if fits(used, c) {
				maximal = false
				break
			}
		}
		if maximal && len(chosen) > 0 {
			l := make(MIGLayout, len(chosen))
			for i, c := range chosen {
				l[i] = MIGPlacement{Profile: profiles[c.p], Start: c.start}
			}
			slices.SortStableFunc(l, func(a, b MIGPlacement) int {
				if a.Profile.Slices != b.Profile.Slices {
					return b.Profile.Slices - a.Profile.Slices
				}
				if a.Profile.MemorySlices != b.Profile.MemorySlices {
					return b.Profile.MemorySlices - a.Profile.MemorySlices
				}
				return a.Start - b.Start
			})
			if key := l.Names(); !seen[key] {
				seen[key] = true
				out = append(out, l)
			}
			return
		}
		for i := from; i < len(cands); i++ {
			if c := cands[i]; fits(used, c) {
				mask := uint(1)<<profiles[c.p].MemorySlices - 1
				walk(i+1, used|mask<<c.start, append(chosen, c))
			}
		}
	}
	walk(0, 0, nil)
	slices.SortFunc(out, func(a, b MIGLayout) int { return strings.Compare(a.Names(), b.Names()) })
	return out
}
