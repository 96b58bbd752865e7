package main

import (
	"fmt"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/launch"
)

func newWatchCmd() *cobra.Command {
	var (
		lf   launcherFlags
		job  string
		all  bool
		from uint64
	)
	cmd := &cobra.Command{
		Use:   "watch [--sidecar ID] [--job ID] [--all | --from-seq N]",
		Short: "Follow a sidecar's lease events: throttles, raises, revokes, expiries",
		Long: `Follow the lease events of a sidecar (of one job with --job) as they are
published, one line each, until interrupted. It resumes where it was after a
reconnect or a sidecar restart. By default it starts with the next event;
--all starts with the oldest the sidecar keeps, --from-seq N at stream
sequence N (the seq of a line printed earlier, plus one). Without --sidecar
(and COLOCD_SIDECAR unset) it follows the one sidecar on the bus, or lists
the sidecars there are and asks for --sidecar.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all && from > 0 {
				return usageError{fmt.Errorf("watch: --all and --from-seq: want one of them")}
			}
			lf.Persistent = true
			client, nc, err := lf.dialSidecar(cmd)
			if err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			defer nc.Close()
			var sub *bus.EventSubscription
			switch {
			case all:
				sub, err = client.Events(cmd.Context(), lf.Sidecar, job, 1)
			case from > 0:
				sub, err = client.Events(cmd.Context(), lf.Sidecar, job, from)
			default:
				sub, err = client.EventsSince(cmd.Context(), lf.Sidecar, job, time.Now())
			}
			if err != nil {
				return fmt.Errorf("watch: %w", launch.Describe(err))
			}
			defer sub.Stop()
			w := cmd.OutOrStdout()
			for rec := range sub.C() {
				if lf.asJSON {
					if err := printJSONLine(w, struct {
						Seq uint64 `json:"seq"`
						v1.Event
					}{rec.Seq, rec.Event}); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintln(w, launch.EventLine(rec))
			}
			if err := sub.Err(); err != nil {
				return fmt.Errorf("watch: %w", launch.Describe(err))
			}
			return cmd.Context().Err()
		},
	}
	lf.register(cmd, true)
	cmd.Flags().StringVar(&job, "job", "", "only this job's events")
	cmd.Flags().BoolVar(&all, "all", false, "start with the oldest event the sidecar keeps")
	cmd.Flags().Uint64Var(&from, "from-seq", 0, "start at this stream sequence")
	return cmd
}
