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
	root := &cobra.Command{
		Use:           "colocd",
		Short:         "Co-locate training jobs on inference GPUs without breaking latency SLOs",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newServeCmd(), newProfileCmd(), newPredictCmd(), newCalibrateCmd(),
		newAdmitCmd(), newPlaceCmd(), newQuoteCmd(), newRenewCmd(), newReleaseCmd(), newRegisterCmd(), newStatusCmd(), newLoadtestCmd(), newSimserveCmd(), newMIGCmd())
	return root.ExecuteContext(ctx)
}
