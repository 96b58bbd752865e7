package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// run builds the command tree and executes it with args; tests call it
// directly with their own writers.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// newRootCmd is the command tree, with every command's example.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "colocd",
		Short:         "Co-locate training jobs on inference GPUs without breaking latency SLOs",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readBuildInfo().short(),
	}
	root.SetVersionTemplate("colocd {{.Version}}\n")
	root.AddCommand(newServeCmd(), newProfileCmd(), newPredictCmd(), newCalibrateCmd(),
		newAdmitCmd(), newPlaceCmd(), newQuoteCmd(), newRenewCmd(), newReleaseCmd(), newRegisterCmd(), newStatusCmd(), newLoadtestCmd(), newSimserveCmd(), newMIGCmd(), newVersionCmd())
	addExamples(root)
	return root
}
