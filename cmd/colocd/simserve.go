package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/simserver"
	"github.com/colocd/colocd/launch"
	"github.com/colocd/colocd/predictor"
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
			arrivals, err := simArrivals(tracePath, rate, duration, compress)
			if err != nil {
				return fmt.Errorf("simserve: %w", err)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			jobs := &simJobs{}
			if lf.Sidecar != "" {
				client, nc, err := lf.Dial(true)
				if err != nil {
					return fmt.Errorf("simserve: %w", err)
				}
				defer nc.Close()
				wg.Go(func() {
					jobs.follow(ctx, poll, func(ctx context.Context) ([]simserver.Trainer, error) {
						st, err := client.Status(ctx, lf.Sidecar)
						if err != nil {
							return nil, launch.Describe(err)
						}
						return runningTrainers(st, tr), nil
					}, cmd.ErrOrStderr())
				})
			}
			srv, err := simserver.New(simserver.Config{Preset: preset, ModelName: model, Arrivals: arrivals, Start: time.Now(),
				Latency:  &simserver.Model{Inference: inf, Calibration: cal, Mode: predictor.ModeMPS, Requests: requests, Seed: 1, SMs: cal.Device.SMs},
				Trainers: jobs.now, ErrorFactor: errFact, Seed: 1})
			if err != nil {
				return fmt.Errorf("simserve: %w", err)
			}
			return serveSim(ctx, cmd.OutOrStdout(), listen, srv, arrivals, linger)
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

// simArrivals reads the trace (compressed) or draws Poisson arrivals.
func simArrivals(tracePath string, rate float64, d time.Duration, compress float64) ([]time.Duration, error) {
	if tracePath == "" {
		a := simserver.Poisson(rate, d, 1)
		if len(a) == 0 {
			return nil, fmt.Errorf("--rate %g for --duration %s: no request", rate, d)
		}
		return a, nil
	}
	f, err := os.Open(tracePath)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	defer f.Close()
	a, err := simserver.ParseTrace(f)
	if err != nil {
		return nil, fmt.Errorf("--trace %s: %w", tracePath, err)
	}
	return simserver.Compress(a, compress), nil
}

// runningTrainers are the jobs a sidecar's status shows on the shared GPU,
// each as a tr job at its lease's percentage: the leases with registered
// processes, less those holding a lent instance, which shares nothing.
func runningTrainers(st *bus.Status, tr *predictor.Profile) []simserver.Trainer {
	var out []simserver.Trainer
	for _, l := range st.Leases {
		if len(l.PIDs) > 0 && l.Instance == nil {
			out = append(out, simserver.Trainer{Profile: tr, Pct: l.ActiveThreadPct})
		}
	}
	return out
}

// simJobs are the training jobs the simulated server runs next to.
type simJobs struct {
	mu   sync.Mutex
	jobs []simserver.Trainer
}

func (j *simJobs) now() []simserver.Trainer {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.jobs
}

// follow reads the jobs every poll until ctx ends; a failed read keeps the
// last jobs and is reported once until a read succeeds again.
func (j *simJobs) follow(ctx context.Context, poll time.Duration, read func(context.Context) ([]simserver.Trainer, error), warn io.Writer) {
	t := time.NewTicker(max(poll, 100*time.Millisecond))
	defer t.Stop()
	failing := false
	for {
		jobs, err := read(ctx)
		switch {
		case err != nil && !failing:
			fmt.Fprintf(warn, "simserve: reading the sidecar's leases: %v (keeping the last ones)\n", err)
			failing = true
		case err == nil:
			failing = false
			j.mu.Lock()
			j.jobs = jobs
			j.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serveSim serves the page until linger after the last request, or until
// ctx ends.
func serveSim(ctx context.Context, out io.Writer, listen string, srv *simserver.Server, arrivals []time.Duration, linger time.Duration) error {
	hs, addr, done, err := simHTTP(listen, srv)
	if err != nil {
		return fmt.Errorf("simserve: --listen: %w", err)
	}
	fmt.Fprintf(out, "simulated server: http://%s/metrics, %d requests over %s\n", addr, len(arrivals), arrivals[len(arrivals)-1].Round(time.Second))
	end := time.NewTimer(arrivals[len(arrivals)-1] + linger)
	defer end.Stop()
	select {
	case <-ctx.Done():
	case <-end.C:
	case err := <-done:
		return fmt.Errorf("simserve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

// simHTTP serves srv's metrics page at /metrics on listen until the
// server is closed; done gets what Serve returned.
func simHTTP(listen string, srv *simserver.Server) (hs *http.Server, addr net.Addr, done <-chan error, err error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", srv)
	hs = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	return hs, ln.Addr(), served, nil
}
