package ncu

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/predictor"
)

// Options says how the kernels of an export become a profile.
type Options struct {
	// Kind of the workload (required: an export does not say whether its
	// kernels are a request or an iteration).
	Kind predictor.Kind
	// Name of the profile; default: the file's base name without .csv
	// (ImportFile) or "ncu" (Import).
	Name string
	// Device is the GPU's name, when known (an export names it only by
	// index).
	Device string
	// Waves writes each kernel's rounds of thread blocks (Op.Waves), which
	// turns on the MPS model's head-of-line wait next to this workload, as
	// the Kineto importer does by default.
	Waves bool
	// UnitMS, when > 0, is the unit's length timed without the profiler:
	// Nsight Compute replays each kernel alone, so an export records no
	// host gaps, and the unit's idle time (UnitMS less the kernels' time)
	// is laid out by the summary rule (predictor.SpreadIdle). 0: no gaps,
	// the kernels back to back.
	UnitMS float64
}

// ImportFile reads the export at path (Parse) and makes its profile
// (Profile).
func ImportFile(path string, opts Options) (*predictor.Profile, error) {
	if opts.Name == "" {
		opts.Name = strings.TrimSuffix(filepath.Base(path), ".csv")
	}
	return importer(opts).ImportFile(path)
}

// Import is ImportFile on a reader.
func Import(r io.Reader, opts Options) (*predictor.Profile, error) {
	return importer(opts).Import(r)
}

// importer checks opts, parses the export and makes its profile.
func importer(opts Options) predictor.Importer[[]Kernel] {
	return predictor.Importer[[]Kernel]{
		What:  "nsight compute export",
		Check: opts.check,
		Parse: Parse,
		Build: func(ks []Kernel, name string) (*predictor.Profile, error) { return Profile(ks, opts, name) },
	}
}

func (o Options) check() error {
	switch {
	case o.Kind != predictor.KindInference && o.Kind != predictor.KindTraining:
		return &field.Error{Path: "kind", Want: `"inference" or "training" (an export does not say)`, Got: fmt.Sprintf("%q", o.Kind)}
	case !(o.UnitMS >= 0) || math.IsInf(o.UnitMS, 0):
		return &field.Error{Path: "unit_ms", Want: "a unit length in ms > 0 (0: the kernels back to back)", Got: fmt.Sprint(o.UnitMS)}
	}
	return nil
}

// Profile makes the profile of kernels (in launch order), one op each:
//   - dur_us, the kernel's duration;
//   - sm, min(1, blocks / SMs), one SM's share at least (1 when the export
//     gives neither figure);
//   - occupancy, its achieved occupancy;
//   - dram and l2, its DRAM and L2 throughput over their peaks, measured
//     where the Kineto importer leaves them to the MPS model's estimate
//     from the kernel's name;
//   - waves (with Options.Waves), its rounds of blocks, one for a partial
//     round;
//   - gap_us, none, or the unit's idle time by the summary rule
//     (Options.UnitMS).
//
// Each figure the export lacks is left out of every op and said in the
// profile's notes.
func Profile(kernels []Kernel, opts Options, name string) (*predictor.Profile, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if len(kernels) == 0 {
		return nil, invalid("no kernels")
	}
	ops := make([]predictor.Op, len(kernels))
	var busy float64
	sms := 0
	missing := map[string]int{}
	for i, k := range kernels {
		if !(k.DurUS >= 0) || k.DurUS > 3.6e9 {
			return nil, invalid("kernel %d (%s): duration %v µs, want 0 to one hour", k.ID, k.Name, k.DurUS)
		}
		op := predictor.Op{Name: k.Name, DurUS: math.Round(k.DurUS*1000) / 1000, SM: 1}
		busy += op.DurUS
		if k.Blocks > 0 && k.SMs >= 1 {
			op.SM = min(1, max(k.Blocks, 1)/k.SMs)
			sms = max(sms, int(min(k.SMs, 10000)))
		} else {
			missing["sm (launch__grid_size and launch__sm_count)"]++
		}
		if known(k.Occupancy) {
			op.Occupancy = k.Occupancy
		} else {
			missing["occupancy ("+MetricOccupancy+")"]++
		}
		if known(k.DRAM) {
			d := k.DRAM
			op.DRAM = &d
		} else {
			missing["dram ("+MetricDRAM+")"]++
		}
		if known(k.L2) {
			l := k.L2
			op.L2 = &l
		} else {
			missing["l2 ("+MetricL2+")"]++
		}
		if opts.Waves {
			if k.Waves >= 0 { // NaN: unknown
				op.Waves = min(max(1, math.Round(k.Waves*1000)/1000), predictor.MaxWaves)
			} else {
				missing["waves ("+MetricWaves+")"]++
			}
		}
		ops[i] = op
	}
	if busy <= 0 {
		return nil, invalid("its %d kernels have zero total duration", len(kernels))
	}
	notes := []string{"Nsight Compute replays each kernel alone: the export has no host gaps between kernels"}
	for _, what := range slices.Sorted(maps.Keys(missing)) {
		notes = append(notes, fmt.Sprintf("%s: %d of %d kernels had none in the export", what, missing[what], len(kernels)))
	}
	if opts.UnitMS > 0 {
		unit := opts.UnitMS * 1000
		if unit < busy {
			return nil, &field.Error{Path: "unit_ms", Want: fmt.Sprintf("at least the kernels' time, %.3f ms", busy/1000), Got: fmt.Sprint(opts.UnitMS)}
		}
		predictor.SpreadIdle(ops, unit-busy)
		for i := range ops {
			ops[i].GapUS = math.Round(ops[i].GapUS*1000) / 1000
		}
		notes = append(notes, fmt.Sprintf("the unit's idle time, %.3f ms of %g ms (--unit-ms), laid out as a summary profile's", (unit-busy)/1000, opts.UnitMS))
	} else {
		notes = append(notes, "no --unit-ms: the kernels run back to back, a unit of pure GPU work")
	}
	p := &predictor.Profile{
		Format: predictor.ProfileFormat,
		Name:   cmp.Or(opts.Name, "ncu"),
		Kind:   opts.Kind,
		Device: predictor.Device{Name: opts.Device, SMs: sms},
		Ops:    ops,
		Notes:  notes,
		Source: &predictor.Source{Trace: name, Format: "ncu", Unit: "every profiled kernel", Kernels: len(kernels), KernelTimeUS: busy, SpanUS: busy},
	}
	if opts.UnitMS > 0 {
		p.Source.SpanUS = opts.UnitMS * 1000
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func known(v float64) bool { return !math.IsNaN(v) && v >= 0 && v <= 1 }
