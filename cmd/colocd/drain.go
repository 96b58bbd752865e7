package main

import (
	"fmt"
	"time"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/sidecar"
	"github.com/spf13/cobra"
)

// newDrainCmds are colocd drain and colocd undrain: an operator's order,
// on the sidecar's host, written to its data directory as colocd launcher
// add writes the launchers directory (never with a launcher's key).
func newDrainCmds() []*cobra.Command {
	var path, reason string
	var asJSON bool
	dataDir := func() (string, error) {
		cfg, err := configs.LoadWith(path, nil)
		if err != nil {
			return "", err
		}
		return cfg.Sidecar.DataDir, nil
	}
	drain := &cobra.Command{
		Use:   "drain --config FILE [--reason TEXT]",
		Short: "Stop a sidecar admitting and revoke its leases, before maintenance of its GPU or server",
		Long: `Drain the sidecar of this host: within two seconds it denies every admit and
quote ("draining"), revokes its leases with admission.guard.deadline to stop
(their launchers get revoke events and checkpoint), shows the drain in
status, /readyz and its capacity summary (placement passes it by), and stays
drained across restarts until colocd undrain. /readyz stays 200: the
inference server beside it still serves.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := dataDir()
			if err != nil {
				return fmt.Errorf("drain: %w", err)
			}
			o, err := sidecar.WriteDrain(d, reason)
			if err != nil {
				return fmt.Errorf("drain: %w", err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"drained": true, "since": o.Since, "reason": o.Reason, "file": sidecar.DrainPath(d)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "drained since %s (%s): the sidecar denies admits and revokes its leases within 2 s; colocd undrain --config %s opens it again\n",
				o.Since.Format(time.RFC3339), sidecar.DrainPath(d), path)
			return nil
		},
	}
	drain.Flags().StringVar(&reason, "reason", "", "what the drain is for, told in denies, revokes and status")
	undrain := &cobra.Command{
		Use:   "undrain --config FILE",
		Short: "Let a drained sidecar admit again",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := dataDir()
			if err != nil {
				return fmt.Errorf("undrain: %w", err)
			}
			was, err := sidecar.RemoveDrain(d)
			if err != nil {
				return fmt.Errorf("undrain: %w", err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"drained": false, "was_drained": was})
			}
			if !was {
				fmt.Fprintln(cmd.OutOrStdout(), "the sidecar was not drained")
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), "undrained: the sidecar admits again within 2 s")
			return nil
		},
	}
	for _, c := range []*cobra.Command{drain, undrain} {
		c.Flags().StringVar(&path, "config", "/etc/colocd/colocd.yaml", "the sidecar's config file, for sidecar.data_dir")
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	return []*cobra.Command{drain, undrain}
}
