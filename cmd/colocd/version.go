package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/internal/buildinfo"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print colocd's version, the commit it was built from, and its Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := buildinfo.Read(version)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), b)
			}
			commit := b.Commit
			switch {
			case commit == "":
				commit = "unknown (not built from a checkout)"
			case b.Modified:
				commit += " (modified)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "colocd %s\ncommit %s\nbuilt  %s %s\n", b.Version, commit, b.Go, b.Platform)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
