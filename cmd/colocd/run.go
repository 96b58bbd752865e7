package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/fleet"
	"github.com/colocd/colocd/launch"
)

func newRunCmd() *cobra.Command {
	var (
		lf         launcherFlags
		af         admitFlags
		cfg        launch.Config
		place      bool
		k          int
		onThrottle string
		node       string
	)
	cmd := &cobra.Command{
		Use:   "run --job ID --profile FILE [admit flags] -- CMD [ARGS...]",
		Short: "Run a training command under a lease: admit, renew, follow throttles, release",
		Long: `Run a training command under a lease that colocd run owns for the command's life
(docs/cli.md#run). It admits the job as colocd admit does (or, with --place,
places it on the fleet), starts CMD in its own process group with the lease's
environment (CUDA_MPS_*, COLOCD_LEASE_ID; the token only with --pass-token),
registers the command's GPU processes (read again every --register-every, so
that torchrun and DataLoader workers are covered), renews the lease, and
follows its events:

  throttle  stop CMD (--on-throttle: restart sends SIGTERM, then SIGKILL after
            --grace; signal:SIGUSR1 lets it checkpoint and exit) and start it
            again at the new percentage, registered before the deadline
  raise     ignored, unless --take-raises; the first after a measure_first
            grant (min_pct until the sidecar has measured) is always taken
  revoke    stop CMD; exit 75, or with --readmit ask again
  lost      a lease that cannot be renewed: CMD is stopped before it would
            run past it; exit 69, or with --readmit ask again

When CMD exits the lease is released and run exits with CMD's status. SIGINT
or SIGTERM is forwarded to CMD's group; run releases and exits 128+N. A deny
exits 3 without starting CMD, unless --wait-for-slot asks again. Each event is
one line on stderr (--json: one JSON object a line).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return errors.New("want the command to run after --, e.g. colocd run --job j1 --profile train.json -- python train.py")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.OnThrottle, err = launch.ParseAction(onThrottle); err != nil {
				return usageError{fmt.Errorf("run: --on-throttle: %w", err)}
			}
			if node != "" && !place {
				return usageError{errors.New("run: --node: only with --place")}
			}
			if !place && lf.Sidecar == "" {
				return usageError{errors.New("run: --sidecar: want the sidecar's id (env " + launch.EnvSidecar + "), or --place to choose one from the fleet")}
			}
			lf.Persistent = true
			client, nc, err := af.prepare(cmd, &lf, !place)
			if err != nil {
				return fmt.Errorf("run: %w", err)
			}
			defer nc.Close()
			cfg.Command, cfg.Env = args, os.Environ()
			cfg.Stdin, cfg.Stdout, cfg.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			cfg.Log, cfg.JSON = cmd.ErrOrStderr(), lf.asJSON
			cfg.Processes = af.req.Processes
			ctx := bus.TraceFromEnv(cmd.Context(), os.Getenv)
			res, err := launch.Run(ctx, cfg, client, launch.NewAdmitter(client, &af.req, lf.Sidecar, place, fleet.PlaceOptions{K: k, Node: node}))
			var de *launch.DeniedError
			switch {
			case errors.As(err, &de):
				return deniedError{fmt.Errorf("run: %w", err)}
			case err != nil && launch.NoOffer(err):
				return deniedError{fmt.Errorf("run: no GPU would take the job: %w", launch.Describe(err))}
			case err != nil:
				return statusError{code: res.Status, err: fmt.Errorf("run: %w", launch.Describe(err))}
			case res.Status != 0:
				return statusError{code: res.Status}
			}
			return nil
		},
	}
	lf.register(cmd, true)
	af.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&place, "place", false, "place the job on the fleet's best GPU (as colocd place) instead of admitting at --sidecar")
	fs.IntVar(&k, "k", fleet.DefaultPlaceK, "with --place: how many of the best-ranked sidecars to quote")
	registerNode(cmd, &node)
	fs.StringVar(&onThrottle, "on-throttle", "restart", "what a throttle does to CMD: restart (SIGTERM, SIGKILL after --grace, start again) or signal:NAME (e.g. signal:SIGUSR1: CMD checkpoints and exits, then starts again)")
	fs.DurationVar(&cfg.Grace, "grace", launch.DefaultGrace, "how long CMD gets to exit after SIGTERM (or the throttle's signal) before SIGKILL; never past a throttle's or revoke's deadline")
	fs.BoolVar(&cfg.TakeRaises, "take-raises", false, "restart CMD at a raise's higher percentage (by default a raise is ignored)")
	fs.BoolVar(&cfg.Readmit, "readmit", false, "after a revoke or a lost lease, ask for a new lease with backoff and start CMD again, instead of exiting 75 or 69")
	fs.DurationVar(&cfg.WaitForSlot, "wait-for-slot", 0, "after a deny (or a sidecar busy or away), ask again with backoff and jitter for up to this long before exiting 3")
	fs.DurationVar(&cfg.RegisterEvery, "register-every", launch.DefaultRegisterEvery, "how often CMD's processes are read again and, when they changed, registered")
	fs.BoolVar(&cfg.PassToken, "pass-token", false, "put the lease token in CMD's environment ("+launch.EnvToken+"); by default CMD never sees it")
	return cmd
}
