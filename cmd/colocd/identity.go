package main

import (
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/colocd/colocd/natsserver"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/termtext"
	"github.com/colocd/colocd/launch"
	"github.com/spf13/cobra"
)

// newLauncherCmd manages the launcher identities of an embedded server
// (docs/security.md#launchers): one NKey per launcher or team.
func newLauncherCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "launcher",
		Short: "Add, remove and list the identities launchers connect with",
		Long: `Each launcher (or team) connects with its own NKey: the sidecar knows who sent
each request and gives each identity its fair share; no identity can read
another's replies; one can be removed without touching the others. The
sidecar keeps the public keys in nats.launchers.dir (<data_dir>/launchers)
and reads it again every two seconds: an identity added can connect at
once, and one removed is disconnected.`,
		Args: cobra.NoArgs,
	}
	var path, dir string
	var asJSON bool
	cmd.PersistentFlags().StringVar(&path, "config", "/etc/colocd/colocd.yaml", "the sidecar's config file, for nats.launchers.dir")
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "the launchers directory (default: the config's nats.launchers.dir)")
	launchersDir := func() (string, error) {
		if dir != "" {
			return dir, nil
		}
		cfg, err := configs.LoadWith(path, nil)
		if err != nil {
			return "", err
		}
		return cfg.LauncherDir(), nil
	}
	// inDir completes a subcommand: it gets --json, and runs run with the
	// launchers directory; its errors name the subcommand.
	inDir := func(c *cobra.Command, run func(cmd *cobra.Command, args []string, dir string) error) *cobra.Command {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			d, err := launchersDir()
			if err == nil {
				err = run(cmd, args, d)
			}
			if err != nil {
				return fmt.Errorf("launcher %s: %w", cmd.Name(), err)
			}
			return nil
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		return c
	}
	var out string
	add := inDir(&cobra.Command{
		Use:   "add NAME --out FILE",
		Short: "Make a launcher identity: its seed goes to FILE, its public key to the launchers directory",
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, args []string, d string) error {
		if out == "" {
			out = args[0] + ".nk"
		}
		l, err := natsserver.AddLauncherSeedFile(d, args[0], out)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]string{"name": l.Name, "key": l.Key, "seed_file": absPath(out)})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "launcher %s: key %s\nits seed is in %s (mode 0600): give it to the launcher alone, e.g.\n  export %s=%s\n",
			l.Name, l.Key, out, launch.EnvNKey, termtext.ShellQuote(absPath(out)))
		return nil
	})
	add.Flags().StringVar(&out, "out", "", "the file the seed is written to, mode 0600 (default NAME.nk; must not exist)")
	remove := inDir(&cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a launcher identity: its connections are closed and it cannot connect again",
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, args []string, d string) error {
		if err := natsserver.RemoveLauncher(d, args[0]); err != nil {
			return err
		}
		if asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"name": args[0], "removed": true})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "launcher %s removed; a running sidecar disconnects it within seconds\n", args[0])
		return nil
	})
	list := inDir(&cobra.Command{
		Use:   "list",
		Short: "List the launcher identities of the launchers directory",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, _ []string, d string) error {
		ls, err := natsserver.ReadLaunchers(d)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(cmd.OutOrStdout(), append([]natsserver.Launcher{}, ls...)) // [] when none
		}
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tKEY")
		for _, l := range ls {
			fmt.Fprintf(w, "%s\t%s\n", l.Name, l.Key)
		}
		return w.Flush()
	})
	cmd.AddCommand(add, remove, list)
	return cmd
}

// absPath is path made absolute, or path when that fails.
func absPath(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}
