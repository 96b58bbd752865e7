package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/predictor/kineto"
	"github.com/colocd/colocd/predictor/ncu"

	"github.com/colocd/colocd/predictor"
	"github.com/spf13/cobra"
)

// profileFormats are the trace formats `colocd profile import` reads.
var profileFormats = []string{"kineto", "ncu"}

func newProfileCmd() *cobra.Command {
	return groupCmd("profile", "Work with workload profiles (colocd.profile/v1)", newProfileImportCmd(), newProfileValidateCmd())
}

func newProfileImportCmd() *cobra.Command {
	var (
		format, kind, out, device string
		step                      int
		opts                      kineto.Options
		asJSON                    bool
	)
	cmd := &cobra.Command{
		Use:   "import --format kineto|ncu --out FILE TRACE",
		Short: "Import a profiler trace as a profile",
		Long: `Import a PyTorch profiler (Kineto) trace (.json or .json.gz), or an Nsight
Compute CSV export (ncu --csv), as a colocd.profile/v1 file.

Kineto: the unit is one ProfilerStep (the median-length one, or --step N), the
GPU work launched inside a record_function annotation (--annotation TEXT), or
the whole trace when it has no steps; every kernel on every stream is an op.
ncu: every profiled kernel is an op, with its measured SM fill, waves,
occupancy, DRAM and L2 throughput; --kind is required, and --unit-ms lays out
the idle time an export does not record. See docs/profiles.md for the rules.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "kineto" && format != "ncu" {
				return fmt.Errorf("profile import: --format: want one of %s, got %q", strings.Join(profileFormats, ", "), format)
			}
			for _, f := range map[string][]string{"ncu": {"step", "annotation", "max-ops"}, "kineto": {"device"}}[format] {
				if cmd.Flags().Changed(f) {
					return fmt.Errorf("profile import: --%s: not an option of --format %s", f, format)
				}
			}
			switch predictor.Kind(kind) {
			case "", predictor.KindInference, predictor.KindTraining:
				opts.Kind = predictor.Kind(kind)
			default:
				return fmt.Errorf("profile import: --kind: want inference or training (default: from the trace), got %q", kind)
			}
			if out == "" {
				return errors.New("profile import: --out: want the path of the profile to write")
			}
			if cmd.Flags().Changed("step") {
				opts.Step = &step
			}
			imp := func() (*predictor.Profile, error) { return kineto.ImportFile(args[0], opts) }
			if format == "ncu" {
				imp = func() (*predictor.Profile, error) {
					return ncu.ImportFile(args[0], ncu.Options{Kind: opts.Kind, Name: opts.Name, Device: device, Waves: opts.Waves, UnitMS: opts.UnitMS})
				}
			}
			p, err := imp()
			var fe *field.Error
			if errors.As(err, &fe) && (fe.Path == "unit_ms" || fe.Path == "kind") {
				return fmt.Errorf("profile import: --%s: want %s, got %s", strings.ReplaceAll(fe.Path, "_", "-"), fe.Want, fe.Got)
			}
			if err != nil {
				return fmt.Errorf("profile import: %w", err)
			}
			if err := predictor.SaveProfile(out, p); err != nil {
				return fmt.Errorf("profile import: %w", err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), kineto.Summarize(p, out))
			}
			kineto.Summarize(p, out).WriteText(cmd.OutOrStdout(), cmd.ErrOrStderr())
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON: {name, kind, ops, span_ms, device, sms, unit, out, notes}")
	f.StringVar(&format, "format", "", "trace format: "+strings.Join(profileFormats, ", ")+" (required)")
	f.StringVar(&kind, "kind", "", "inference or training (Kineto default: training when the trace has ProfilerStep annotations; ncu: required)")
	f.IntVar(&step, "step", 0, "import ProfilerStep#N (default: the median-length step)")
	f.StringVar(&opts.Annotation, "annotation", "", "import the GPU work of the annotation whose name contains this text (the median-length one)")
	f.StringVar(&opts.Name, "name", "", "profile name (default: the trace file name without .json/.json.gz)")
	f.IntVar(&opts.MaxOps, "max-ops", 0, "keep only the first N kernels of the unit (default: all)")
	f.BoolVar(&opts.Waves, "waves", true, "write each kernel's rounds of thread blocks (ops[].waves), which turns on the MPS head-of-line wait next to this workload (on by default, chosen by held-out error: docs/predictor.md; --waves=false for the fluid model)")
	f.Float64Var(&opts.UnitMS, "unit-ms", 0, "the unit's length timed without the profiler, ms (a back-to-back request, a training iteration): host gaps are scaled to match (default: as traced; ncu: the idle time is laid out as a summary profile's, default none)")
	f.StringVar(&device, "device", "", "ncu: the GPU's name (an export names it only by index)")
	f.StringVarP(&out, "out", "o", "", "profile file to write (required)")
	return cmd
}

// validated is one file of profile validate --json.
func newProfileValidateCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check profile files (colocd.profile/v1)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			all, failed := predictor.CheckProfiles(args)
			if asJSON {
				if err := printJSON(cmd.OutOrStdout(), all); err != nil {
					return err
				}
			}
			for _, c := range all {
				switch {
				case asJSON:
				case c.OK:
					fmt.Fprintf(cmd.OutOrStdout(), "ok %s (%s)\n", c.Name, c.File)
				default:
					fmt.Fprintf(cmd.ErrOrStderr(), "FAIL %s\n", c.Error)
				}
			}
			if failed > 0 {
				return fmt.Errorf("profile validate: %d of %d profiles invalid", failed, len(args))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print [{file, ok, name, kind, error}], one per file")
	return cmd
}
