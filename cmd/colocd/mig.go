package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/migplan"
)

func newMIGCmd() *cobra.Command {
	return groupCmd("mig", "MIG profiles and layouts of a GPU, without a GPU", newMIGLayoutsCmd(), newMIGPlanCmd())
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
			out, err := migplan.Layouts(name)
			if err != nil {
				return fmt.Errorf("mig layouts: %w", err)
			}
			return printAs(cmd.OutOrStdout(), asJSON, out, migplan.WriteLayouts)
		},
	}
	cmd.Flags().StringVar(&name, "gpu", "", `the GPU's NVML name, e.g. "NVIDIA H200"`)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
