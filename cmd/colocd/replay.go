package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/atomicfile"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/replay"
	"github.com/colocd/colocd/simserver/llm"
	"github.com/spf13/cobra"
)

func newReplayCmd() *cobra.Command {
	var (
		cfgPath, tracePath, service string
		trainPath, device, svgPath  string
		serverKind                  string
		policies                    []string
		errFactor                   float64
		startMin, minutes, sms      int
		seed                        uint64
		asJSON                      bool
	)
	cmd := &cobra.Command{
		Use:   "replay --trace FILE [--config colocd.yaml [--service NAME]] [--error F] [--json] [--svg FILE]",
		Short: "Replay an arrival trace: what would colocd have done with this traffic?",
		Long: `Replay a recorded arrival trace (the Azure LLM inference CSV format, with a
TIMESTAMP column) against a simulated inference server, in simulated time,
with a simulated training launcher that asks for a slot, renews it, restarts
its workers when throttled or raised and asks again after a revoke; and
colocd's own admission controller and guard deciding. Three policies:
static (decide on the configured rate; no guard), reactive (the guard on the
observed rate) and forecast (the guard on the forecast rate, as colocd
runs). For each it reports the minutes whose p99 was over the SLO (minutes
with at least 20 requests are judged), the training work as a fraction of a
static grant's, and the throttles, raises, revokes and evictions; --json
prints them as JSON, --svg draws them over time.

With --config, the service (--service, or the file's only one), its SLO and
rate, its metrics preset and window, the sharing mode, the admission and
predictor settings come from the configuration, the calibration for
--device. Without it, the default replay: a V100-profiled service at the
trace's mean rate with a p99 SLO of 100 ms, on an H200 under MPS, so that two
traces compare. --error F makes the simulated server F times slower than the
predictor says: the prediction error only observation can catch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tracePath == "" {
				return fmt.Errorf("replay: --trace: want an arrival trace file")
			}
			if startMin < 0 || minutes < 0 {
				return fmt.Errorf("replay: --start %d, --minutes %d: want minutes ≥ 0", startMin, minutes)
			}
			var want []replay.Policy
			for _, p := range policies {
				pol, err := replay.ParsePolicy(strings.TrimSpace(p))
				if err != nil {
					return fmt.Errorf("replay: --policies: %w", err)
				}
				want = append(want, pol)
			}
			if serverKind != "llm" && serverKind != "predictor" {
				return fmt.Errorf("replay: --server: want llm or predictor, got %q", serverKind)
			}
			f, err := os.Open(tracePath)
			if err != nil {
				return fmt.Errorf("replay: --trace: %w", err)
			}
			all, err := llm.ParseTrace(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("replay: --trace %s: %w", tracePath, err)
			}
			trace := replay.Slice(all, time.Duration(startMin)*time.Minute, time.Duration(minutes)*time.Minute)
			if len(trace) == 0 {
				return fmt.Errorf("replay: --start %d --minutes %d: no request of the trace's %d in that span", startMin, minutes, len(all))
			}
			var cfg replay.Config
			switch {
			case cfgPath != "":
				file, err := configs.Load(cfgPath)
				if err != nil {
					return fmt.Errorf("replay: --config: %w", err)
				}
				var engine *llm.Config
				if serverKind == "llm" {
					e := llm.Default()
					engine = &e
				}
				if cfg, err = replay.FromConfig(file, service, device, sms, trace, engine); err != nil {
					return fmt.Errorf("replay: --config %s: %w", cfgPath, err)
				}
			case service != "":
				return fmt.Errorf("replay: --service: want --config too (the default replay has one service)")
			case serverKind == "llm":
				cfg, err = replay.Default(trace)
			default:
				cfg, err = replay.DefaultPredicted(trace)
			}
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			if trainPath != "" {
				if cfg.Launcher.Profile, err = predictor.LoadProfile(trainPath); err != nil {
					return fmt.Errorf("replay: --training: %w", err)
				}
			}
			cfg.ErrorFactor, cfg.ServerSeed, cfg.Policies = errFactor, seed, want
			results, err := replay.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if svgPath != "" {
				title := fmt.Sprintf("%s: %s, SLO p99 %g ms, error ×%g", tracePath, cfg.Service.Name, cfg.Service.SLOP99MS, cfg.ErrorFactor)
				if err := atomicfile.Write(svgPath, replay.SVG(title, cfg.Service.SLOP99MS, results), 0o644); err != nil {
					return fmt.Errorf("replay: --svg: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Policies []replay.Result `json:"policies"`
				}{results})
			}
			planned := fmt.Sprintf("planned at %.2f req/s, SLO p99 %g ms", cfg.Service.RateRPS, cfg.Service.SLOP99MS)
			if cfg.Service.BurstSteps > 0 {
				planned = fmt.Sprintf("an engine planned at %.1f steps/s in bursts of %.0f, SLO inter-token p99 %g ms", cfg.Service.RateRPS, cfg.Service.BurstSteps, cfg.Service.SLOP99MS)
			}
			server := "latencies drawn from the prediction"
			if cfg.Engine != nil {
				server = "an LLM engine"
			}
			fmt.Fprintf(out, "%s: %d requests over %.0f min (%.2f req/s); service %s %s; the server: %s, ×%g\n",
				tracePath, len(trace), trace[len(trace)-1].Arrival.Minutes(), replay.MeanRate(trace), cfg.Service.Name, planned, server, cfg.ErrorFactor)
			return replay.WriteTable(out, results)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tracePath, "trace", "", "the arrival trace: a CSV with a TIMESTAMP column (Azure LLM inference format)")
	f.StringVar(&cfgPath, "config", "", "a colocd configuration: the service, its SLO and the settings to replay (default: the default replay)")
	f.StringVar(&service, "service", "", "with --config: the service the trace is for (default: the file's only one)")
	f.StringVar(&serverKind, "server", "llm", "the simulated server: llm (an LLM engine built apart from the predictor) or predictor (latencies drawn from colocd's own prediction)")
	f.StringVar(&trainPath, "training", "", "the training job's profile (default: the built-in V100 training step)")
	f.StringVar(&device, "device", replay.DefaultDevice, "with --config: the GPU, for the calibration preset")
	f.IntVar(&sms, "sms", replay.DefaultSMs, "with --config: the GPU's SM count")
	f.Float64Var(&errFactor, "error", 1, "the simulated server's latency over the prediction: the predictor that much too low")
	f.IntVar(&startMin, "start", 0, "the first minute of the trace to replay")
	f.IntVar(&minutes, "minutes", 0, "minutes of the trace to replay (0: to its end)")
	f.StringSliceVar(&policies, "policies", []string{"static", "reactive", "forecast"}, "the policies to report: static, reactive, forecast")
	f.Uint64Var(&seed, "seed", 11, "the seed of the simulated server's latency draws")
	f.BoolVar(&asJSON, "json", false, `print {"policies":[{"name","minutes","minutes_over","work_vs_static",...}]}`)
	f.StringVar(&svgPath, "svg", "", "draw load, forecast, SLO, observed p99 and the job's percentage over time to this SVG file")
	return cmd
}
