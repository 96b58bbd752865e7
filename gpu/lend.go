package gpu

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxGrantInstances bounds gpu.grant_instances: a GPU has at most seven
// GPU instances.
const MaxGrantInstances = 7

// Lendable is a MIG device the sidecar may lend whole (gpu.grant_instances),
// as read now: what runs on it tells whether it is free.
type Lendable struct {
	// UUID is the MIG device's ("MIG-…"), what CUDA_VISIBLE_DEVICES takes.
	UUID string
	MIG  MIGDevice
	SMs  int
	// Memory and Processes are the MIG device's, as NVML reads them.
	Memory    Memory
	Processes []Process
	// Fault, when set, is the critical XID that named the instance (or
	// the whole GPU) since the sidecar started: the instance is not to be
	// lent, and a job on it is to stop.
	Fault string
}

// Lender is a device that may lend other MIG devices of its GPU whole.
// *NVMLDevice and *SimDevice implement it; with no gpu.grant_instances it
// lends none.
type Lender interface {
	Lendable(ctx context.Context) ([]Lendable, error)
}

var (
	_ Lender = (*NVMLDevice)(nil)
	_ Lender = (*SimDevice)(nil)
)

// checkGrantInstances checks gpu.grant_instances: MIG devices, at most
// seven, none twice, not the guarded device, and only beside a MIG device.
func (c Config) checkGrantInstances(add func(path, want, got string)) {
	if len(c.GrantInstances) == 0 {
		return
	}
	if sel, err := ParseSelector(c.Device); err == nil && !sel.IsMIG() {
		add("gpu.grant_instances", "none unless gpu.device is a MIG device (a sidecar that guards a whole GPU has no other instance to lend)", strconv.Itoa(len(c.GrantInstances))+" instances")
		return
	}
	if len(c.GrantInstances) > MaxGrantInstances {
		add("gpu.grant_instances", fmt.Sprintf("at most %d MIG devices", MaxGrantInstances), strconv.Itoa(len(c.GrantInstances)))
		return
	}
	seen := map[string]bool{strings.ToLower(c.Device): true}
	for i, g := range c.GrantInstances {
		at := fmt.Sprintf("gpu.grant_instances[%d]", i)
		sel, err := ParseSelector(g)
		switch {
		case err != nil || !sel.IsMIG():
			add(at, `a MIG device: its UUID ("MIG-" and 8-4-4-4-12 hex digits) or <gpu>:<gi>:<ci>`, quote(g))
			continue
		case seen[strings.ToLower(g)]:
			add(at, "a MIG device not named before, nor gpu.device", quote(g))
			continue
		}
		seen[strings.ToLower(g)] = true
		if c.Backend == BackendSim {
			c.checkSimInstance(add, at, sel)
		}
	}
}

// checkSimMIG checks gpu.sim.mig: profiles of the simulated GPU that fit
// on it together.
func (c Config) checkSimMIG(add func(path, want, got string)) {
	if len(c.Sim.MIG) == 0 {
		return
	}
	profiles, err := MIGProfiles(c.Sim.Name)
	if err != nil {
		add("gpu.sim.mig", "none, for a simulated GPU colocd has no MIG profiles of: "+err.Error(), strings.Join(c.Sim.MIG, ", "))
		return
	}
	var names []string
	for _, p := range profiles {
		names = append(names, p.Name)
	}
	ok := true
	for i, m := range c.Sim.MIG {
		if !slices.Contains(names, m) {
			add(fmt.Sprintf("gpu.sim.mig[%d]", i), "a GPU instance profile of "+c.Sim.Name+": one of "+strings.Join(names, ", "), quote(m))
			ok = false
		}
	}
	if ok && simLayout(profiles, c.Sim.MIG) == nil {
		add("gpu.sim.mig", "GPU instances that fit on the GPU together (colocd mig layouts lists the largest)", strings.Join(c.Sim.MIG, "+"))
	}
}

// checkSimInstance checks that a MIG selector names one of gpu.sim.mig's
// instances, when it names it by ids.
func (c Config) checkSimInstance(add func(path, want, got string), at string, sel Selector) {
	if !sel.Instance {
		return
	}
	if sel.GI < 1 || sel.GI > len(c.Sim.MIG) || sel.CI != 0 {
		add(at, fmt.Sprintf("one of the simulated GPU's MIG devices, GPU instance 1 to %d and compute instance 0 (gpu.sim.mig)", len(c.Sim.MIG)), quote(sel.String()))
	}
}

// simLayout places the named profiles on the GPU's memory slices, in
// their order; nil when they do not fit together (no two share a memory
// slice, each at one of its profile's starts). It places the larger
// instances first, each at its lowest free start, and backtracks.
func simLayout(profiles []MIGProfile, names []string) MIGLayout {
	want := make([]MIGProfile, 0, len(names))
	for _, n := range names {
		for _, p := range profiles {
			if p.Name == n {
				want = append(want, p)
			}
		}
	}
	order := make([]int, len(want))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return want[b].MemorySlices - want[a].MemorySlices })
	starts := make([]int, len(want))
	var used [MIGMemorySlices]bool
	var place func(k int) bool
	place = func(k int) bool {
		if k == len(order) {
			return true
		}
		p := want[order[k]]
		for _, st := range p.Starts {
			if st+p.MemorySlices > MIGMemorySlices || slices.Contains(used[st:st+p.MemorySlices], true) {
				continue
			}
			for j := st; j < st+p.MemorySlices; j++ {
				used[j] = true
			}
			starts[order[k]] = st
			if place(k + 1) {
				return true
			}
			for j := st; j < st+p.MemorySlices; j++ {
				used[j] = false
			}
		}
		return false
	}
	if !place(0) {
		return nil
	}
	out := make(MIGLayout, len(want))
	for i, p := range want {
		out[i] = MIGPlacement{Profile: p, Start: starts[i]}
	}
	return out
}
