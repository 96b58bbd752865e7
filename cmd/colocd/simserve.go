package main

import (
	"context"
	"errors"
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
		lf                      launcherFlags
		listen, preset, model   string
		tracePath, infPath      string
		trainPath, calPath      string
		rate, compress, errFact float64
		duration, poll, linger  time.Duration
		requests                int
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
			if infPath == "" || trainPath == "" {
				return errors.New("simserve: --inference and --training: want the paths of the service's and the jobs' profiles")
			}
			if (tracePath == "") == (rate == 0) {
				return errors.New("simserve: --trace or --rate: want one of the two")
			}
			if !(compress > 0) || !(errFact > 0) || rate < 0 {
				return fmt.Errorf("simserve: --compress %g, --error %g, --rate %g: want factors above 0 and a rate ≥ 0", compress, errFact, rate)
			}
			inf, err := predictor.LoadProfile(infPath)
			if err != nil {
				return fmt.Errorf("simserve: --inference: %w", err)
			}
			tr, err := predictor.LoadProfile(trainPath)
			if err != nil {
				return fmt.Errorf("simserve: --training: %w", err)
			}
			cal, err := predictor.ResolveCalibration(calPath, inf.Device.Name)
			if err != nil {
				return fmt.Errorf("simserve: --calibration: %w", err)
			}
			arrivals, err := simserver.Arrivals(tracePath, rate, duration, compress)
			if err != nil {
				return fmt.Errorf("simserve: %w", err)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			jobs := &simserver.Jobs{}
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
			srv, err := simserver.New(simserver.Config{Preset: preset, ModelName: model, Arrivals: arrivals, Start: time.Now(),
				Latency:  &simserver.Model{Inference: inf, Calibration: cal, Mode: predictor.ModeMPS, Requests: requests, Seed: 1, SMs: cal.Device.SMs},
				Trainers: jobs.Now, ErrorFactor: errFact, Seed: 1})
			if err != nil {
				return fmt.Errorf("simserve: %w", err)
			}
			if err := simserver.Serve(ctx, cmd.OutOrStdout(), listen, srv, arrivals, linger); err != nil {
				return fmt.Errorf("simserve: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8000", "address of the metrics page")
	f.StringVar(&preset, "preset", "vllm", "metrics format: vllm, sglang or tgi")
	f.StringVar(&model, "model-name", "sim", "the model label's value")
	f.StringVar(&tracePath, "trace", "", "CSV of arrivals with a TIMESTAMP column")
	f.Float64Var(&compress, "compress", 1, "replay the trace this many times faster")
	f.Float64Var(&rate, "rate", 0, "Poisson arrivals at this many requests a second (instead of --trace)")
	f.DurationVar(&duration, "duration", time.Hour, "with --rate, how long requests arrive")
	f.StringVar(&infPath, "inference", "", "the service's inference profile")
	f.StringVar(&trainPath, "training", "", "the profile of each job next to it")
	f.StringVar(&calPath, "calibration", "", "calibration file (default: the preset for the inference profile's GPU)")
	f.Float64Var(&errFact, "error", 1, "multiply every latency by this: the predictor off by this much")
	f.IntVar(&requests, "requests", predictor.DefaultRequests, "simulated requests per prediction")
	f.DurationVar(&poll, "poll", time.Second, "with --sidecar, how often to read its leases")
	f.DurationVar(&linger, "linger", time.Minute, "how long to go on serving after the last request")
	lf.register(cmd, true)
	return cmd
}
