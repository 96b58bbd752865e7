package kineto

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"errors"
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

// Options chooses which part of a PyTorch profiler (Kineto) trace
// becomes the profile's unit, and how the profile is labelled.
type Options struct {
	// Kind of the workload; "" means training when the trace has
	// ProfilerStep annotations, else inference.
	Kind predictor.Kind
	// Step picks ProfilerStep#Step (PyTorch numbers steps from 0); nil
	// picks the median-length step.
	Step *int
	// Annotation, when set, picks the GPU work launched inside a user
	// annotation (record_function) whose name contains this text, the
	// median-length one when several match. It cannot be combined with Step.
	Annotation string
	// Name of the profile; default: the trace file's base name without
	// .json/.json.gz (ImportFile) or "kineto" (Import).
	Name string
	// MaxOps, when > 0, keeps only the first MaxOps kernels of the unit's
	// merged timeline (a shorter workload cut from a real one).
	MaxOps int
	// Waves writes each kernel's rounds of thread blocks (Op.Waves, from
	// blocks per SM, block size and achieved occupancy), which turns on the
	// MPS model's head-of-line wait next to this workload. colocd profile
	// import sets it by default, chosen by held-out error on real H200
	// measurements (docs/predictor.md).
	Waves bool
	// UnitMS, when > 0, is the unit's length timed without the profiler
	// (one back-to-back request, one training iteration): the host gaps,
	// which the profiler stretches, are scaled by one factor so that the
	// unit lasts that long (predictor.Profile.FitUnit); the kernels keep
	// their traced length.
	UnitMS float64
}

// ErrInvalidTrace is wrapped by every error about a trace file that is not a
// usable profiler trace (truncated, not JSON, no GPU kernels).
var ErrInvalidTrace = errors.New("invalid trace")

// ErrUnitNotFound is wrapped when the requested ProfilerStep or annotation is
// not in the trace; the message lists what the trace has.
var ErrUnitNotFound = errors.New("unit not found")

// ImportFile imports the Kineto trace at path (.json or .json.gz); see
// Import. The profile's name defaults to the file's base name without
// .json/.json.gz, and its source records that base name.
func ImportFile(path string, opts Options) (*predictor.Profile, error) {
	if opts.Name == "" {
		opts.Name = traceStem(filepath.Base(path))
	}
	return importer(opts).ImportFile(path)
}

// Import turns a PyTorch profiler (Kineto) Chrome trace into a profile;
// gzip input is recognised by its magic bytes. The unit is one ProfilerStep
// (the median-length one unless opts.Step names one), the work launched inside
// a user annotation (opts.Annotation), or the whole trace when it has no
// steps; a kernel belongs to a step or annotation when its launching CPU
// call (same correlation id) started inside it, since kernels run later.
//
// Each kernel of the unit, on every stream, becomes one op on a single merged
// timeline (memcpy and memset time counts as gap): gap_us is the GPU's idle
// time before the op and dur_us the time the op adds to the busy timeline, so
// that kernels overlapping on different streams are not counted twice and the
// ops add up to the unit's span. Source keeps the raw kernel count, kernel
// time and span. sm is min(1, blocks per SM), occupancy the estimated achieved
// occupancy; dram and l2 stay unknown. Times are rounded to whole ns. The
// rules are in docs/profiles.md.
//
// A trace that is not usable wraps ErrInvalidTrace; a step or annotation that
// is not there wraps ErrUnitNotFound.
func Import(r io.Reader, opts Options) (*predictor.Profile, error) {
	return importer(opts).Import(r)
}

// importer checks opts, decodes the trace and builds the profile of the
// unit opts selects.
func importer(opts Options) predictor.Importer[*kinetoTrace] {
	return predictor.Importer[*kinetoTrace]{
		What:  "kineto trace",
		Check: func() error { return checkKinetoOptions(opts) },
		Parse: readKineto,
		Build: func(tr *kinetoTrace, traceName string) (*predictor.Profile, error) {
			return tr.profile(opts, traceName)
		},
	}
}

// profile builds the profile of the unit opts selects.
func (tr *kinetoTrace) profile(opts Options, traceName string) (*predictor.Profile, error) {
	u, err := tr.selectUnit(opts)
	if err != nil {
		return nil, err
	}
	return tr.buildProfile(u, opts, traceName)
}

func checkKinetoOptions(opts Options) error {
	switch {
	case opts.Kind != "" && opts.Kind != predictor.KindInference && opts.Kind != predictor.KindTraining:
		return &field.Error{Path: "kind", Want: `"inference", "training" or "" (from the trace)`, Got: fmt.Sprintf("%q", opts.Kind)}
	case opts.Step != nil && *opts.Step < 0:
		return &field.Error{Path: "step", Want: "a ProfilerStep number ≥ 0", Got: fmt.Sprint(*opts.Step)}
	case opts.MaxOps < 0:
		return &field.Error{Path: "max_ops", Want: "a count ≥ 0 (0: every kernel)", Got: fmt.Sprint(opts.MaxOps)}
	case opts.UnitMS < 0 || math.IsNaN(opts.UnitMS) || math.IsInf(opts.UnitMS, 0):
		return &field.Error{Path: "unit_ms", Want: "a unit length in ms > 0 (0: as traced)", Got: fmt.Sprint(opts.UnitMS)}
	case opts.UnitMS > 0 && opts.MaxOps > 0:
		return &field.Error{Path: "unit_ms", Want: "no unit length with max_ops (a cut unit is not the unit that was timed)", Got: fmt.Sprint(opts.UnitMS)}
	case opts.Step != nil && opts.Annotation != "":
		return &field.Error{Path: "step", Want: "either a step or an annotation, not both", Got: fmt.Sprintf("step %d and annotation %q", *opts.Step, opts.Annotation)}
	}
	return nil
}

// traceStem is a trace file's base name without .json or .json.gz.
func traceStem(base string) string {
	for _, ext := range []string{".json.gz", ".json", ".gz"} {
		if s, ok := strings.CutSuffix(base, ext); ok && s != "" {
			return s
		}
	}
	return base
}

// invalidTrace builds an error that wraps ErrInvalidTrace and any %w
// operands of format.
func invalidTrace(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidTrace}, a...)...)
}

// kinetoInput returns r, transparently gunzipped when it starts with the gzip
// magic bytes.
func kinetoInput(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, invalidTrace("read: %w", err)
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, invalidTrace("gzip header: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

// kinetoUnit is the part of the trace that becomes the profile: the kernels
// launched in [lo, hi], or every kernel.
type kinetoUnit struct {
	label  string
	whole  bool
	lo, hi int64
}

// selectUnit picks the unit: the annotation asked for, the step asked for,
// the median step, or the whole trace.
func (tr *kinetoTrace) selectUnit(opts Options) (kinetoUnit, error) {
	var steps, hits []kinetoAnnotation
	for _, a := range tr.annotations {
		if a.step >= 0 {
			steps = append(steps, a)
		}
	}
	switch {
	case opts.Annotation != "":
		for _, a := range tr.annotations {
			if a.user && strings.Contains(a.name, opts.Annotation) {
				hits = append(hits, a)
			}
		}
		if len(hits) == 0 {
			return kinetoUnit{}, fmt.Errorf("%w: no user annotation whose name contains %q; the trace has %s",
				ErrUnitNotFound, opts.Annotation, listNames(tr.annotations, func(a kinetoAnnotation) bool { return a.user }))
		}
		a := medianAnnotation(hits)
		return kinetoUnit{label: "annotation " + a.name, lo: a.start, hi: a.end}, nil
	case opts.Step != nil:
		for _, a := range steps {
			if a.step == *opts.Step && (len(hits) == 0 || a.start < hits[0].start) {
				hits = []kinetoAnnotation{a}
			}
		}
		if len(hits) == 0 {
			return kinetoUnit{}, fmt.Errorf("%w: no ProfilerStep#%d; the trace has %s",
				ErrUnitNotFound, *opts.Step, listNames(steps, func(kinetoAnnotation) bool { return true }))
		}
		return kinetoUnit{label: hits[0].name, lo: hits[0].start, hi: hits[0].end}, nil
	case len(steps) > 0:
		a := medianAnnotation(steps)
		return kinetoUnit{label: a.name, lo: a.start, hi: a.end}, nil
	}
	return kinetoUnit{label: "whole trace", whole: true}, nil
}

// medianAnnotation returns the lower-median annotation by length (ties: the
// earlier one), so that the choice is deterministic.
func medianAnnotation(as []kinetoAnnotation) kinetoAnnotation {
	sorted := slices.Clone(as)
	slices.SortFunc(sorted, func(a, b kinetoAnnotation) int {
		return cmp.Or(cmp.Compare(a.end-a.start, b.end-b.start), cmp.Compare(a.start, b.start))
	})
	return sorted[(len(sorted)-1)/2]
}

// listNames describes the distinct names of the annotations that pass keep:
// a few of them and how many there are.
func listNames(as []kinetoAnnotation, keep func(kinetoAnnotation) bool) string {
	const shown = 6
	var names []string
	seen := map[string]bool{}
	for _, a := range as {
		if keep(a) && !seen[a.name] {
			seen[a.name] = true
			names = append(names, fmt.Sprintf("%q", predictor.ShortKernelName(a.name)))
		}
	}
	switch {
	case len(names) == 0:
		return "none"
	case len(names) > shown:
		return fmt.Sprintf("%s, … (%d names)", strings.Join(names[:shown], ", "), len(names))
	}
	return strings.Join(names, ", ")
}

// buildProfile turns the unit's kernels into ops on one merged timeline.
func (tr *kinetoTrace) buildProfile(u kinetoUnit, opts Options, traceName string) (*predictor.Profile, error) {
	var ks []kinetoKernel
	unlaunched := 0
	for _, k := range tr.kernels {
		if u.whole || (k.launch >= u.lo && k.launch <= u.hi) {
			ks = append(ks, k)
			if k.launchUnknown {
				unlaunched++
			}
		}
	}
	if len(ks) == 0 {
		return nil, invalidTrace("%s launched no GPU kernels", u.label)
	}
	var notes []string
	ks, devID, note := oneDevice(ks)
	if note != "" {
		notes = append(notes, note)
	}
	// Stable: kernels that start and end together keep their file order.
	slices.SortStableFunc(ks, func(a, b kinetoKernel) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
	})
	if opts.MaxOps > 0 && len(ks) > opts.MaxOps {
		ks = ks[:opts.MaxOps]
		u.label += fmt.Sprintf(" (first %d kernels)", opts.MaxOps)
	}
	dev, known := tr.devices[devID]
	if !known {
		notes = append(notes, fmt.Sprintf("device: the trace has no deviceProperties for device %d; name and SM count unknown", devID))
	}
	ops, src, opNotes := mergeKernels(ks, dev, opts.Waves)
	notes = append(notes, opNotes...)
	if !u.whole && unlaunched > 0 {
		notes = append(notes, fmt.Sprintf("%d kernels had no launching runtime event (same correlation); assigned to %s by their own start time", unlaunched, u.label))
	}
	if src.busy <= 0 {
		return nil, invalidTrace("%s: its %d kernels have zero total duration", u.label, len(ks))
	}
	p := &predictor.Profile{
		Format: predictor.ProfileFormat,
		Name:   cmp.Or(opts.Name, "kineto"),
		Kind:   cmp.Or(opts.Kind, tr.defaultKind()),
		Device: predictor.Device{Name: dev.name, SMs: dev.sms},
		Ops:    ops,
		Notes:  notes,
		Source: &predictor.Source{
			Trace: traceName, Format: "kineto", Unit: u.label,
			Kernels: len(ks), KernelTimeUS: src.kernelTime / 1000, SpanUS: nsToUS(src.span), Streams: src.streams,
		},
	}
	if opts.UnitMS > 0 {
		k, err := p.FitUnit(opts.UnitMS)
		if err != nil {
			return nil, err
		}
		p.Notes = append(p.Notes, fmt.Sprintf("host gaps scaled by %.3f so that the unit lasts %g ms, as timed without the profiler (--unit-ms)", k, opts.UnitMS))
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func (tr *kinetoTrace) defaultKind() predictor.Kind {
	for _, a := range tr.annotations {
		if a.step >= 0 {
			return predictor.KindTraining
		}
	}
	return predictor.KindInference
}

// oneDevice keeps the kernels of the device that ran most of them (ties: the
// lowest id): a profile describes one GPU.
func oneDevice(ks []kinetoKernel) ([]kinetoKernel, int64, string) {
	count := map[int64]int{}
	for _, k := range ks {
		count[k.device]++
	}
	ids := slices.Sorted(maps.Keys(count))
	best := ids[0]
	for _, id := range ids {
		if count[id] > count[best] {
			best = id
		}
	}
	if len(ids) == 1 {
		return ks, best, ""
	}
	kept := slices.DeleteFunc(slices.Clone(ks), func(k kinetoKernel) bool { return k.device != best })
	return kept, best, fmt.Sprintf("device: kernels ran on devices %v; kept device %d (%d kernels), dropped %d",
		ids, best, len(kept), len(ks)-len(kept))
}

// mergeFigures are the raw figures of the merged kernels, in ns. The kernel
// time is a float64: exact up to 104 days, and a sum that cannot overflow.
type mergeFigures struct {
	kernelTime float64
	span, busy int64
	streams    int
}

// mergeKernels lays kernels (sorted by start, then end) on one timeline. An
// op's gap is the GPU's idle time before it; its duration is the time it adds
// to the busy timeline, so that overlapping kernels on different streams are
// not counted twice and the ops' gaps and durations add up to the span.
func mergeKernels(ks []kinetoKernel, dev kinetoDevice, withWaves bool) ([]predictor.Op, mergeFigures, []string) {
	sms := dev.sms
	var f mergeFigures
	var overlapped, gridSM, noSM, noOcc, clampedOcc int
	streams := map[int64]bool{}
	ops := make([]predictor.Op, len(ks))
	busyEnd := ks[0].start
	for i, k := range ks {
		streams[k.stream] = true
		f.kernelTime += float64(k.end - k.start)
		if k.start < busyEnd {
			overlapped++
		}
		gap := max(0, k.start-busyEnd)
		dur := max(0, k.end-max(k.start, busyEnd))
		busyEnd = max(busyEnd, k.end)
		f.busy += dur
		op := predictor.Op{Name: predictor.ShortKernelName(k.name), DurUS: nsToUS(dur), GapUS: nsToUS(gap), SM: 1, Occupancy: 1}
		switch {
		case k.hasBlocks:
			op.SM = clamp01(k.blocksPerSM)
		case k.hasGrid && sms > 0:
			op.SM = clamp01(k.gridBlocks / float64(sms))
			gridSM++
		default:
			noSM++
		}
		if op.SM <= 0 {
			// A launched kernel occupies at least one SM; profiles require sm > 0.
			op.SM = minSM(sms)
		}
		if k.hasOccupancy {
			op.Occupancy = clamp01(k.occupancyPct / 100)
			if op.Occupancy != k.occupancyPct/100 {
				clampedOcc++
			}
		} else {
			noOcc++
		}
		if withWaves {
			op.Waves = waves(k, dev.warps, dev.warpSize) // 0 (absent): unknown
		}
		ops[i] = op
	}
	f.span = busyEnd - ks[0].start
	f.streams = len(streams)
	var notes []string
	add := func(n int, format string) {
		if n > 0 {
			notes = append(notes, fmt.Sprintf(format, n, len(ks)))
		}
	}
	add(overlapped, "%d of %d kernels overlapped earlier ones (other streams) and were merged into one timeline: their dur_us is only the time they add to the GPU's busy time; source.kernel_time_us is the raw sum")
	add(gridSM, "sm: %d of %d kernels had no \"blocks per SM\"; computed from grid size and the SM count")
	add(noSM, "sm: %d of %d kernels had neither \"blocks per SM\" nor a grid size and SM count; set to 1")
	add(noOcc, "occupancy: %d of %d kernels had no \"est. achieved occupancy %%\"; set to 1")
	add(clampedOcc, "occupancy: %d of %d kernels reported an occupancy outside 0–100 %%; clamped")

	return ops, f, notes
}

func clamp01(v float64) float64 {
	if !(v > 0) { // also NaN
		return 0
	}
	return min(v, 1)
}

// nsToUS converts integer ns to µs; the result prints with at most three
// decimals, so saved profiles are stable.
func nsToUS(ns int64) float64 { return float64(ns) / 1000 }

// minSM is the SM fraction of one SM, or 1 % when the SM count is unknown.
func minSM(sms int) float64 {
	if sms > 0 {
		return 1 / float64(sms)
	}
	return 0.01
}

// defaultWarpsPerSM is the most warps an SM holds on every NVIDIA
// data-centre GPU since Volta (2,048 threads of 32-thread warps), for a
// trace whose deviceProperties lack them.
const defaultWarpsPerSM = 64

// waves is how many rounds of thread blocks kernel k runs: its blocks per
// SM over the blocks an SM held at once. Those follow from the achieved
// occupancy (active warps over the SM's most) and the warps of a block, at
// least one block (an occupancy reported as 0 % is below 0.5 %: one block).
// A kernel of one partial round runs one wave, a block then lasting the
// whole kernel. 0 when a figure is missing. Rounded to 1/1000.
func waves(k kinetoKernel, warpsPerSM, warpSize float64) float64 {
	if !k.hasBlocks || !k.hasOccupancy || k.blockThreads <= 0 || k.blocksPerSM <= 0 {
		return 0
	}
	if warpsPerSM <= 0 || warpSize <= 0 {
		warpsPerSM, warpSize = defaultWarpsPerSM, 32
	}
	warpsPerBlock := math.Ceil(k.blockThreads / warpSize)
	resident := max(1, math.Min(k.occupancyPct, 100)/100*warpsPerSM/warpsPerBlock)
	w := max(1, k.blocksPerSM/resident)
	return math.Min(math.Round(w*1000)/1000, predictor.MaxWaves)
}
