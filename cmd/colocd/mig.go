package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/gpu"
)

func newMIGCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mig", Short: "MIG profiles and layouts of a GPU, without a GPU"}
	cmd.AddCommand(newMIGLayoutsCmd(), newMIGPlanCmd())
	return cmd
}

// migLayoutJSON is one layout in `colocd mig layouts --json`.
type migLayoutJSON struct {
	Layout    string            `json:"layout"`
	Slices    int               `json:"compute_slices"`
	Instances []migInstanceJSON `json:"instances"`
}

type migInstanceJSON struct {
	Profile      string `json:"profile"`
	Start        int    `json:"start"`
	MemorySlices int    `json:"memory_slices"`
	Slices       int    `json:"compute_slices"`
	SMs          int    `json:"sms"`
	MemoryMiB    int    `json:"memory_mib"`
}

func newMIGLayoutsCmd() *cobra.Command {
	var (
		name   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "layouts --gpu NAME [--json]",
		Short: "List a GPU's maximal MIG layouts",
		Long: `List the maximal MIG layouts of a GPU model: GPU instances that share no
memory slice, with no room left for another, one line per list of profiles,
from NVIDIA's profile table for the GPU (docs/gpu.md#mig cites it). Each
instance shows its profile, first memory slice, SMs and memory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return fmt.Errorf("mig layouts: --gpu: want a GPU name such as \"NVIDIA H200\"")
			}
			profiles, err := gpu.MIGProfiles(name)
			if err != nil {
				return fmt.Errorf("mig layouts: --gpu: %w", err)
			}
			var out []migLayoutJSON
			for _, l := range gpu.MIGLayouts(profiles) {
				j := migLayoutJSON{Layout: l.Names()}
				for _, p := range l {
					j.Slices += p.Profile.Slices
					j.Instances = append(j.Instances, migInstanceJSON{Profile: p.Profile.Name, Start: p.Start, MemorySlices: p.Profile.MemorySlices,
						Slices: p.Profile.Slices, SMs: p.Profile.SMs, MemoryMiB: p.Profile.MemoryMiB})
				}
				out = append(out, j)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "layout\tcompute slices\tinstances (profile@first memory slice: SMs, MiB)")
			for _, l := range out {
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
		},
	}
	cmd.Flags().StringVar(&name, "gpu", "", `the GPU's NVML name, e.g. "NVIDIA H200"`)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
