package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/internal/buildinfo"
	"github.com/colocd/colocd/launch"
	"github.com/colocd/colocd/loadtest"
)

func newLoadtestCmd() *cobra.Command {
	var (
		lf  launcherFlags
		cfg loadtest.Config
	)
	cmd := &cobra.Command{
		Use:   "loadtest (--embedded | --sidecar ID) [--launchers 50] [--duration 30s] [--max-jobs N]",
		Short: "Run many launchers' admit/renew/release cycles against one sidecar and report rates, latencies and errors",
		Long: `Run N launchers, each on its own NATS connection, that loop until the
duration ends: a $SRV.PING.colocd round trip (the baseline: answered by the
NATS micro library, no colocd code), then admit, and when admitted renew once
and release. A deny (max_jobs full, SLO) is an outcome, not an error. A status
sampler records the most live leases the sidecar reported.

--embedded starts an in-process sidecar (simulated H200, embedded NATS on a
loopback port, data in a temporary directory removed afterwards, one
inference service whose SLO no job breaks, so max_jobs is what denies); the
launchers reach it over TCP loopback, and the report adds the process's RSS,
heap and goroutines before and after. Otherwise the launchers connect with
the usual --server, --nkey/--creds and --sidecar.

Exits 1 when any call failed, when more leases than --max-jobs were seen, or
when a lease of the run is still live after it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLoadtest(cmd, &cfg); err != nil {
				return fmt.Errorf("loadtest: %w", err)
			}
			cfg.Endpoint, cfg.Version, cfg.Log = lf.Endpoint, buildinfo.Semver(version), cmd.ErrOrStderr()
			rep, err := loadtest.Run(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("loadtest: %w", err)
			}
			if lf.asJSON {
				err = printJSON(cmd.OutOrStdout(), rep)
			} else {
				err = rep.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if len(rep.Failures) > 0 {
				return fmt.Errorf("loadtest: %s", strings.Join(rep.Failures, "; "))
			}
			return nil
		},
	}
	lf.register(cmd, true)
	fs := cmd.Flags()
	fs.IntVar(&cfg.Launchers, "launchers", 50, "concurrent launchers, each with its own connection")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long launchers start new cycles (a cycle under way finishes)")
	fs.StringVar(&cfg.Profile, "profile", "testdata/profiles/v100-train-step.json", "the training profile every admit sends")
	fs.StringVar(&cfg.SendProfile, "send-profile", launch.SendAuto, "how admits send the profile, as colocd run does: auto (by reference when large: uploaded once, before the load), inline or ref")
	fs.IntVar(&cfg.MemoryMiB, "memory-mib", 1000, "GPU memory each admit asks for, MiB")
	fs.IntVar(&cfg.MaxJobs, "max-jobs", 0, "--embedded: the sidecar's admission.max_jobs (0: the default, 4); otherwise the bound to check the sampled leases against (0: not checked)")
	fs.BoolVar(&cfg.Embedded, "embedded", false, "start an in-process sidecar and load it over TCP loopback")
	fs.DurationVar(&cfg.DecisionTimeout, "decision-timeout", 0, "--embedded: the sidecar's admission.decision_timeout (0: the default, 5s); keep --timeout above it")
	fs.StringVar(&cfg.ServiceProfile, "service-profile", "testdata/profiles/v100-infer-200.json", "--embedded: the inference service's profile (8 req/s, SLO p99 10 s: no job breaks it, so max_jobs is what denies)")
	return cmd
}

// checkLoadtest validates the flags that need no connection.
func checkLoadtest(cmd *cobra.Command, cfg *loadtest.Config) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if cfg.Embedded {
		for _, name := range []string{"server", "sidecar", "nkey", "creds", "tls-ca", "tls-cert", "tls-key"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--embedded and --%s: want one of the two (the embedded sidecar has its own)", name)
			}
		}
	}
	return nil
}
