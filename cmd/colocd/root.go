package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/colocd/colocd/internal/buildinfo"
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
	err := root.ExecuteContext(ctx)
	cmd, _, ferr := root.Find(args)
	if err != nil && ferr != nil {
		err = usageError{err} // an unknown command
	}
	if err != nil && ferr == nil && evalsOutput(cmd) {
		// The output is a shell program: end it with the command's status,
		// so that eval "$(colocd admit …)" fails as admit did, not with
		// eval's 0 for a deny's comments or for nothing.
		fmt.Fprintf(stdout, "(exit %d)\n", exitCode(err))
	}
	return err
}

// evalsOutput reports whether cmd prints shell lines to eval: admit and
// place, unless --json.
func evalsOutput(cmd *cobra.Command) bool {
	if p := cmd.CommandPath(); p != "colocd admit" && p != "colocd place" {
		return false
	}
	j := cmd.Flags().Lookup("json")
	return j == nil || j.Value.String() != "true"
}

// newRootCmd is the command tree, with every command's example.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "colocd",
		Short:         "Co-locate training jobs on inference GPUs without breaking latency SLOs",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read(version).Short(),
	}
	root.SetVersionTemplate("colocd {{.Version}}\n")
	root.AddCommand(newServeCmd(), newProfileCmd(), newPredictCmd(), newCalibrateCmd(),
		newAdmitCmd(), newPlaceCmd(), newQuoteCmd(), newRenewCmd(), newReleaseCmd(), newRegisterCmd(), newStatusCmd(), newRunCmd(), newWatchCmd(), newLoadtestCmd(), newSimserveCmd(), newMIGCmd(), newVersionCmd(), newProbeCmd(), newDemoCmd(), newReplayCmd(), newLauncherCmd())
	root.AddCommand(newDrainCmds()...)
	addExamples(root)
	markUsageErrors(root)
	return root
}

// groupCmd is a command that only groups its subcommands (colocd mig,
// colocd profile).
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	cmd.AddCommand(subs...)
	return cmd
}

// markUsageErrors makes the errors of flag parsing and of argument counts
// usage errors (exit status 2), on c and every command below it.
func markUsageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		return usageError{fmt.Errorf("%s: %w (see %s --help)", name, err, cmd.CommandPath())}
	})
	if a := c.Args; a != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := a(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markUsageErrors(sub)
	}
}
