package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/fleet"
	"github.com/colocd/colocd/launch"
)

func newPlaceCmd() *cobra.Command {
	var (
		lf   launcherFlags
		af   admitFlags
		k    int
		node string
	)
	cmd := &cobra.Command{
		Use:   "place --job ID --profile FILE [--k 3] [--min-pct N --max-pct N] [--memory-mib N]",
		Short: "Put a training job on the fleet's best GPU: rank by capacity summaries, quote the best few, admit",
		Long: `Place a training job on the best GPU of the fleet without asking every sidecar.
colocd place reads every sidecar's capacity summary (the colocd-fleet KV
bucket, in one request), ranks the sidecars that could take the job, quotes the
best --k at once, stops as soon as they all answered or --timeout passes, and
admits at the best quote: a free MIG instance first, then the highest
percentage, then the GPU with the most margin left (docs/fleet.md). A lost
race (the sidecar denies, or is busy) tries the next quote. On a grant or a
throttle it prints the same shell lines as admit, for the sidecar chosen:

  eval "$(colocd place --job resnet-42 --profile train.json)"

No candidate or no offer exits with status 3, a failure with 1 (docs/cli.md).`,
		Args: cobra.NoArgs,
		RunE: af.run(&lf, false, func(cmd *cobra.Command, client *bus.Client) error {
			p, err := fleet.Place(cmd.Context(), client, &af.req, fleet.PlaceOptions{K: k, Node: node})
			if lf.asJSON && p != nil {
				if jerr := printJSON(cmd.OutOrStdout(), p); jerr != nil {
					return jerr
				}
			}
			if err != nil {
				if p != nil && len(p.Tried) > 0 {
					launch.RetryHint(cmd.ErrOrStderr(), p.Tried[len(p.Tried)-1], &af.req, err)
				}
				if p != nil && p.Summaries > 0 && launch.NoOffer(err) {
					return deniedError{launch.Describe(err)}
				}
				return launch.Describe(err)
			}
			if lf.asJSON {
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), launch.PlacedLine(p))
			lf.Sidecar = p.Sidecar
			token := ""
			if p.Decision.Lease != nil {
				token = p.Decision.Lease.Token
			}
			return writeEnv(cmd.OutOrStdout(), p.Decision, &lf, token)
		}),
	}
	lf.register(cmd, false)
	af.register(cmd)
	cmd.Flags().IntVar(&k, "k", fleet.DefaultPlaceK, "how many of the best-ranked sidecars to quote")
	registerNode(cmd, &node)
	return cmd
}

// envNode is the node a pod runs on, for --node (in Kubernetes, from the
// downward API's spec.nodeName).
const envNode = "COLOCD_NODE"

// registerNode declares --node.
func registerNode(cmd *cobra.Command, node *string) {
	cmd.Flags().StringVar(node, "node", os.Getenv(envNode), "only sidecars on this node (their sidecar.node): a pod places its job on the GPU of its own node (env "+envNode+")")
}
