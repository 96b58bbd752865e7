package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/colocd/colocd/demo"
	"github.com/colocd/colocd/internal/buildinfo"
)

func newDemoCmd() *cobra.Command {
	var (
		infPath, trainPath string
		timeout            time.Duration
		asJSON             bool
	)
	cmd := &cobra.Command{
		Use:   "demo [--timeout 3m] [--json]",
		Short: "Watch a grant, a throttle, two denies, the guard and an expiry on a simulated GPU",
		Long: `Run a scripted scenario on this machine, with no GPU needed: a sidecar with an
embedded NATS server on a simulated H200, a simulated inference server
("` + demo.Service + `", ` + fmt.Sprint(demo.RPS) + ` requests a second, SLO p99 ` + fmt.Sprint(demo.SLOMS) + ` ms) whose latency follows the
jobs that run beside it, and a launcher that asks for four slots: a light
job (granted), a heavy one (throttled), one that will not run below half
the GPU (denied for the SLO) and one too big for the memory (denied). Each
granted job starts a worker process and registers it (the heavy one under
colocd run, as a launcher would run it). Then the server's
load rises to ` + fmt.Sprint(demo.RiseRPS) + ` requests a second: the guard throttles, and the launcher
restarts its worker at the new percentage. The light job's lease is not
renewed and expires: the sidecar ends its MPS client and the launcher stops
its worker. Every step prints what was
asked, what was predicted against which limit, and what was decided, and
why. It ends within --timeout and removes everything it made.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			out := cmd.OutOrStdout()
			interrupted := func() bool { return cmd.Context().Err() != nil }
			steps, err := demo.Run(ctx, demo.Config{Inference: infPath, Training: trainPath, Out: out, Log: cmd.ErrOrStderr(), Quiet: asJSON,
				Interrupted: interrupted, Version: buildinfo.Semver(version)})
			if err != nil && interrupted() {
				err = errors.New("demo: interrupted; everything it started is stopped and removed")
			}
			if asJSON {
				if jerr := printJSON(out, steps); err == nil {
					err = jerr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&infPath, "inference", filepath.Join("testdata", "profiles", "v100-infer-200.json"), "the service's inference profile")
	f.StringVar(&trainPath, "training", filepath.Join("testdata", "profiles", "v100-train-step.json"), "every job's training profile")
	f.DurationVar(&timeout, "timeout", 3*time.Minute, "the longest the demo runs")
	f.BoolVar(&asJSON, "json", false, "print the account as JSON at the end, instead of as it goes")
	return cmd
}
