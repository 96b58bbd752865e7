package main

import (
	"fmt"

	"github.com/colocd/colocd/replay"
	"github.com/spf13/cobra"
)

func newReplayCmd() *cobra.Command {
	var (
		o       replay.Options
		svgPath string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "replay --trace FILE [--config colocd.yaml [--service NAME]] [--error F] [--json] [--svg FILE]",
		Short: "Replay an arrival trace: what would colocd have done with this traffic?",
		Long: `Replay an arrival trace (the Azure LLM inference CSV, or one arrival a line)
on simulated time: a simulated server (--server llm, an LLM engine built
apart from the predictor; or predictor, latencies drawn from the
prediction), a launcher that asks for a slot, honours throttles and comes
back after a revoke, and colocd's own admission and guard deciding, under
static admission, the reactive guard and the forecast guard, beside the
hindsight oracle (the schedule with the most training work that keeps the
SLO, found on the simulated server itself). For each: the minutes over the
SLO, the work against the oracle's and a static grant's, the changes an
hour, the throttles, raises, revokes and evictions (--json; --svg draws
them). The service comes
from --config, or is the default replay's (docs/cli.md); --error F makes the
server F times slower than it would be.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := replay.Prepare(o)
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			results, err := replay.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if err := replay.Report(cmd.OutOrStdout(), o.Trace, cfg, results, asJSON, svgPath); err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Trace, "trace", "", "the arrival trace: the Azure LLM inference CSV, one arrival a line, or synthetic:onoff|diurnal|flash[:SEED] (an hour drawn around the conversation trace's mean rate)")
	f.StringVar(&o.Config, "config", "", "a colocd configuration: the service, its SLO and the settings to replay (default: the default replay)")
	f.StringVar(&o.Service, "service", "", "with --config: the service the trace is for (default: the file's only one)")
	f.StringVar(&o.Server, "server", "llm", "the simulated server: llm (an LLM engine built apart from the predictor) or predictor (latencies drawn from colocd's own prediction)")
	f.StringVar(&o.Training, "training", "", "the training job's profile (default: the built-in V100 training step)")
	f.StringVar(&o.Device, "device", replay.DefaultDevice, "with --config: the GPU, for the calibration preset")
	f.IntVar(&o.SMs, "sms", replay.DefaultSMs, "with --config: the GPU's SM count")
	f.Float64Var(&o.Error, "error", 1, "the simulated server's latency over the prediction: the predictor that much too low")
	f.IntVar(&o.Start, "start", 0, "the first minute of the trace to replay")
	f.IntVar(&o.Minutes, "minutes", 0, "minutes of the trace to replay (0: to its end)")
	var defaults []string
	for _, p := range replay.DefaultPolicies {
		defaults = append(defaults, string(p))
	}
	f.StringSliceVar(&o.Policies, "policies", defaults, "the policies to report: static, reactive, forecast, learned, best-static, oracle, oracle-limit")
	f.StringVar(&o.Forecast, "forecast", "", "override the service's forecast settings: alpha=,beta=,phi=,burst=,horizon= (docs/guard.md)")
	f.Uint64Var(&o.Seed, "seed", 11, "the seed of the simulated server's latency draws")
	f.Float64SliceVar(&o.StepBuckets, "step-buckets", nil, "with --server llm: the bounds of the engine's inter-token latency histogram, in seconds (default: vLLM's, 0.1 then 0.15 around a 125 ms SLO)")
	f.BoolVar(&asJSON, "json", false, `print {"policies":[{"name","minutes","minutes_over","work_vs_oracle","work_vs_static","changes_per_hour",...}]}`)
	f.StringVar(&svgPath, "svg", "", "draw load, forecast, SLO, observed p99 and the job's percentage over time to this SVG file")
	return cmd
}
