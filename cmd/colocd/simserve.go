package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/colocd/colocd/launch"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/simserver"
	"github.com/spf13/cobra"
)

func newSimserveCmd() *cobra.Command {
	var (
		lf           launcherFlags
		o            simserver.Options
		listen       string
		poll, linger time.Duration
	)
	cmd := &cobra.Command{
		Use:   "simserve --inference PROFILE --training PROFILE (--trace CSV | --rate R) [--sidecar ID]",
		Short: "Serve a simulated inference server's metrics, its latency from the predictor",
		Long: `Serve the metrics page of a simulated inference server (vLLM's, SGLang's or
TGI's format) at http://<listen>/metrics, for a sidecar to watch
(services[].metrics). Requests arrive as in --trace (a CSV with a TIMESTAMP
column, such as the Azure LLM inference traces; --compress F replays it F
times faster) or by a Poisson process at --rate for --duration. Each
request's latency is drawn from colocd's prediction for the --inference
profile next to the jobs that run: with --sidecar, every lease of that
sidecar with registered processes, as a --training job at its
active-thread percentage (read from its status each --poll); times --error,
the predictor's error to simulate. It runs until the last request or an
interrupt.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			jobs := &simserver.Jobs{}
			srv, tr, err := o.Build(time.Now(), jobs.Now)
			if err != nil {
				return fmt.Errorf("simserve: %w", err)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			if lf.Sidecar != "" {
				client, nc, err := lf.Dial(true)
				if err != nil {
					return fmt.Errorf("simserve: %w", err)
				}
				defer nc.Close()
				wg.Go(func() {
					jobs.Follow(ctx, poll, func(ctx context.Context) ([]simserver.Trainer, error) {
						st, err := client.Status(ctx, lf.Sidecar)
						if err != nil {
							return nil, launch.Describe(err)
						}
						return simserver.TrainersOf(st, tr), nil
					}, cmd.ErrOrStderr())
				})
			}
			if err := simserver.Serve(ctx, cmd.OutOrStdout(), listen, srv, linger); err != nil {
				return fmt.Errorf("simserve: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8000", "address of the metrics page")
	f.StringVar(&o.Preset, "preset", "vllm", "metrics format: vllm, sglang or tgi")
	f.StringVar(&o.ModelName, "model-name", "sim", "the model label's value")
	f.StringVar(&o.Trace, "trace", "", "the arrival trace: the Azure LLM inference CSV, or one arrival a line")
	f.Float64Var(&o.Compress, "compress", 1, "replay the trace this many times faster")
	f.Float64Var(&o.Rate, "rate", 0, "Poisson arrivals at this many requests a second (instead of --trace)")
	f.DurationVar(&o.Duration, "duration", time.Hour, "with --rate, how long requests arrive")
	f.StringVar(&o.Inference, "inference", "", "the service's inference profile")
	f.StringVar(&o.Training, "training", "", "the profile of each job next to it")
	f.StringVar(&o.Calibration, "calibration", "", "calibration file (default: the preset for the inference profile's GPU)")
	f.Float64Var(&o.Error, "error", 1, "multiply every latency by this: the predictor off by this much")
	f.IntVar(&o.Requests, "requests", predictor.DefaultRequests, "simulated requests per prediction")
	f.DurationVar(&poll, "poll", time.Second, "with --sidecar, how often to read its leases")
	f.DurationVar(&linger, "linger", time.Minute, "how long to go on serving after the last request")
	lf.register(cmd, true)
	return cmd
}
