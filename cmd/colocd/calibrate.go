package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/colocd/colocd/predictor/calibrate"

	"github.com/colocd/colocd/predictor"
	"github.com/spf13/cobra"
)

func newCalibrateCmd() *cobra.Command {
	var (
		measPath, out   string
		obsDir, measOut string
		opts            calibrate.FitOptions
		noCV, asJSON    bool
		weights         map[string]string
	)
	cmd := &cobra.Command{
		Use:   "calibrate (--measurements FILE | --from-observations DIR) --out FILE",
		Short: "Fit the model's device parameters to measurements",
		Long: `Fit the models' device parameters to measured co-location runs
(colocd.measurements/v1): from time-slicing records the virtual slice, the
switching overhead and the hold-over; from MPS records the contention
coefficients. Each with its MAPE in-sample and leave-one-workload-out: every
record predicted by a fit that never saw its training workload (time-slicing
records of one workload: leave-one-record-out). Then, per mode, the
naive slowdown (each figure's solo value times the median measured / solo
ratio of the records) and the blend of the two whose weight, on the grid
0, 0.25, 0.5, 0.75, 1, has the smallest held-out error: every calibrated
prediction of that mode is that blend. The report gives the held-out error
of the simulator, the naive slowdown and the blend (nested: each fold's
weight chosen on the other folds). Writes one colocd.calibration/v1 file
with a section per mode measured. See docs/predictor.md for the method and
docs/formats.md for the files.

With --from-observations, the measurements are what a sidecar recorded of
its inference servers' own metrics (<data_dir>/observations): one record per
window with training jobs at one percentage next to the service, so that a
deployment re-calibrates itself on its own GPU. --measurements-out writes
those records as a measurements file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (measPath == "") == (obsDir == "") {
				return errors.New("calibrate: --measurements: want the path of a colocd.measurements/v1 file, or --from-observations DIR (one of the two)")
			}
			if out == "" && measOut == "" {
				return errors.New("calibrate: --out: want the path of the calibration file to write (or, with --from-observations, --measurements-out)")
			}
			if opts.Requests < 0 {
				return fmt.Errorf("calibrate: --requests: want a count ≥ 1 (0: each record's own or %d), got %d", predictor.DefaultRequests, opts.Requests)
			}
			opts.CrossValidate = !noCV
			var err error
			if opts.Weights, err = parseWeights(weights); err != nil {
				return fmt.Errorf("calibrate: %w", err)
			}
			if opts.Seeds < 0 || opts.Seeds > calibrate.MaxSeeds {
				return fmt.Errorf("calibrate: --seeds: want a count from 1 to %d (0: %d), got %d", calibrate.MaxSeeds, calibrate.DefaultSeeds, opts.Seeds)
			}
			if !(opts.Noise >= 0 && opts.Noise <= 1) {
				return fmt.Errorf("calibrate: --noise: want a fraction in (0, 1] (0: %g), got %g", calibrate.DefaultNoise, opts.Noise)
			}
			m, err := calibrate.Load(cmd.OutOrStdout(), measPath, obsDir, measOut)
			if err != nil {
				return fmt.Errorf("calibrate: %w", err)
			}
			if out == "" {
				return nil
			}
			cal, err := calibrate.FitAll(cmd.Context(), m, opts, cmd.ErrOrStderr())
			if err != nil {
				return fmt.Errorf("calibrate: %w", err)
			}
			cal.Source = fmt.Sprintf("fitted on %s (%d records)", filepath.Base(measPath+obsDir), len(m.Records))
			if m.Source != "" {
				cal.Source += "; measurements: " + m.Source
			}
			if err := predictor.SaveCalibration(out, cal); err != nil {
				return fmt.Errorf("calibrate: %w", err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), cal)
			}
			return calibrate.WriteReport(cmd.OutOrStdout(), cal, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&measPath, "measurements", "", "measurements file (this or --from-observations)")
	f.StringVar(&obsDir, "from-observations", "", "a sidecar's observations directory (<data_dir>/observations) to take the measurements from")
	f.StringVar(&measOut, "measurements-out", "", "with --from-observations, also write the measurements to this file")
	f.StringVarP(&out, "out", "o", "", "calibration file to write (required)")
	f.IntVar(&opts.Requests, "requests", 0, fmt.Sprintf("simulated requests per record, unless the record sets its own (default %d)", predictor.DefaultRequests))
	f.Uint64Var(&opts.Seed, "seed", 1, "arrival seed, unless the record sets its own")
	f.BoolVar(&noCV, "no-cv", false, "skip the cross-validation refits (leave-one-workload-out), and with them the blend: the simulator alone")
	f.BoolVar(&opts.NoBlend, "no-blend", false, "keep the simulator alone: choose no blend with the naive slowdown")
	f.StringToStringVar(&weights, "weight", nil, "weight of a metric in the objective, KEY=W with KEY one of mean, p50, p90, p95, p99, iteration (repeatable; given at all, the unnamed keys weigh 0; default p99=1,p95=0.5,p90=0.25,p50=0.1,mean=0.1,iteration=0.5)")
	f.IntVar(&opts.Seeds, "seeds", 0, fmt.Sprintf("arrival seeds per record, the predictions' mean compared (default %d)", calibrate.DefaultSeeds))
	f.BoolVar(&opts.NoPrior, "no-prior", false, "fit the time-slicing parameters to the records alone, without the prior toward their documented ranges (docs/predictor.md#priors)")
	f.Float64Var(&opts.Noise, "noise", 0, fmt.Sprintf("relative error of the measurements, which sets the prior's weight and the intervals' floor (default %g)", calibrate.DefaultNoise))
	f.BoolVar(&asJSON, "json", false, "print the calibration as JSON")
	return cmd
}

// parseWeights turns --weight KEY=W pairs into the fit's weights (nil:
// the defaults).
func parseWeights(kv map[string]string) (map[string]float64, error) {
	if len(kv) == 0 {
		return nil, nil
	}
	w := map[string]float64{}
	for k, v := range kv {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("--weight %s=%s: want a number ≥ 0", k, v)
		}
		w[k] = f
	}
	if err := calibrate.CheckWeights(w); err != nil {
		return nil, fmt.Errorf("--weight: %w", err)
	}
	return w, nil
}
