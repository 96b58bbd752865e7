package migplan

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/colocd/colocd/gpu"
)

// LayoutInfo is one maximal layout of a GPU model (`colocd mig layouts
// --json`): its name, compute slices and instances.
type LayoutInfo struct {
	Layout    string         `json:"layout"`
	Slices    int            `json:"compute_slices"`
	Instances []InstanceInfo `json:"instances"`
}

// InstanceInfo is one instance of a layout: its profile, first memory
// slice, slices, SMs and memory.
type InstanceInfo struct {
	Profile      string `json:"profile"`
	Start        int    `json:"start"`
	MemorySlices int    `json:"memory_slices"`
	Slices       int    `json:"compute_slices"`
	SMs          int    `json:"sms"`
	MemoryMiB    int    `json:"memory_mib"`
}

// Layouts lists the maximal MIG layouts of the GPU model gpuName from
// NVIDIA's profile table; an unknown model is an error naming --gpu.
func Layouts(gpuName string) ([]LayoutInfo, error) {
	profiles, err := gpu.MIGProfiles(gpuName)
	if err != nil {
		return nil, fmt.Errorf("--gpu: %w", err)
	}
	var out []LayoutInfo
	for _, l := range gpu.MIGLayouts(profiles) {
		j := LayoutInfo{Layout: l.Names()}
		for _, p := range l {
			j.Slices += p.Profile.Slices
			j.Instances = append(j.Instances, InstanceInfo{Profile: p.Profile.Name, Start: p.Start, MemorySlices: p.Profile.MemorySlices,
				Slices: p.Profile.Slices, SMs: p.Profile.SMs, MemoryMiB: p.Profile.MemoryMiB})
		}
		out = append(out, j)
	}
	return out, nil
}

// WriteLayouts writes the layouts as a table, one line each.
func WriteLayouts(w io.Writer, ls []LayoutInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "layout\tcompute slices\tinstances (profile@first memory slice: SMs, MiB)")
	for _, l := range ls {
		desc := ""
		for i, in := range l.Instances {
			if i > 0 {
				desc += "; "
			}
			desc += fmt.Sprintf("%s@%d: %d SMs, %d MiB", in.Profile, in.Start, in.SMs, in.MemoryMiB)
		}
		fmt.Fprintf(tw, "%s\t%d/7\t%s\n", l.Layout, l.Slices, desc)
	}
	return tw.Flush()
}
