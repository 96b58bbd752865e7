package predictor

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/colocd/colocd/field"
)

// ProfileFormat is the format string every profile document carries.
const ProfileFormat = "colocd.profile/v1"

// Kind says what one unit of a profile's ops is: one inference request or one
// training iteration.
type Kind string

// The two kinds of workload.
const (
	KindInference Kind = "inference"
	KindTraining  Kind = "training"
)

// Device names the GPU a profile was taken on.
type Device struct {
	Name string `json:"name"`
	SMs  int    `json:"sms,omitempty"`
}

// KernelNameMax caps an op's name in bytes, as importers write it:
// demangled kernel names run to kilobytes, and profiles travel inline in
// admission requests.
const KernelNameMax = 128

// ShortKernelName cuts name to KernelNameMax bytes at a rune boundary,
// marking the cut with "…".
func ShortKernelName(name string) string {
	if len(name) <= KernelNameMax {
		return name
	}
	cut := KernelNameMax - len("…")
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}

// Op is one GPU kernel of a workload, in launch order.
type Op struct {
	Name string `json:"name,omitempty"`
	// DurUS is the time the op keeps the GPU busy when alone, in µs.
	DurUS float64 `json:"dur_us"`
	// GapUS is GPU idle time before the op (host work, launch, sync), in µs.
	GapUS float64 `json:"gap_us"`
	// SM is the fraction of the device's SMs the kernel can fill alone.
	SM float64 `json:"sm"`
	// Occupancy is the achieved occupancy, a fraction.
	Occupancy float64 `json:"occupancy"`
	// DRAM and L2 are memory intensities in [0,1]; nil when unknown.
	DRAM *float64 `json:"dram,omitempty"`
	L2   *float64 `json:"l2,omitempty"`
	// Waves is how many rounds of thread blocks the kernel runs on the
	// SMs (its blocks over the blocks the device holds at once), when
	// known: a block lasts DurUS/Waves, and a kernel launched by another
	// MPS client waits for blocks to retire (head-of-line blocking). 0:
	// unknown, and the MPS model shares SMs as a fluid.
	Waves float64 `json:"waves,omitempty"`
}

// Summary describes a workload for users with no kernel trace.
type Summary struct {
	// LatencyMS is the solo latency of one request (inference; required there).
	LatencyMS float64 `json:"latency_ms,omitempty"`
	// IterationMS is the solo iteration time (training; optional).
	IterationMS float64 `json:"iteration_ms,omitempty"`
	// GPUUtil is the fraction of time the GPU is busy (nvidia-smi "utilization.gpu").
	GPUUtil float64 `json:"gpu_util"`
	// MemUtil is the fraction of time device memory is read or written.
	MemUtil float64 `json:"mem_util"`
	// KernelUS is the mean kernel length in µs, when known (optional; the
	// expansion's default is SummaryKernelUS).
	KernelUS float64 `json:"kernel_us,omitempty"`
	// SMUtil is the fraction of time the SMs are active, averaged over the
	// SMs (DCGM's DCGM_FI_PROF_SM_ACTIVE), when known (optional; absent,
	// every kernel fills the GPU). SMUtil/GPUUtil is the share of the SMs
	// the kernels keep busy: communication kernels, for one, use few.
	SMUtil float64 `json:"sm_util,omitempty"`
	// BlockUS is the mean of occupancy × thread block time over the
	// kernels that fill every SM (sm ≥ 0.99), weighted by kernel time, or
	// when none does over all kernels, weighted by kernel time × SM share
	// (Summarize computes it from a profile with waves): under MPS a
	// co-runner's kernel waits half of it per unit of this workload's SM
	// share before it starts. The GPU-filling kernels' blocks are the ones
	// a co-runner waits for whole: behind a kernel on few SMs it starts on
	// the SMs left free, and waits at most its own block. 0 (absent):
	// unknown, no head-of-line wait.
	BlockUS float64 `json:"block_us,omitempty"`
	// FullSMShare is the fraction of busy time spent in kernels that fill
	// every SM (sm ≥ 0.99), when known (optional, needs sm_util): a trainer
	// whose kernels are either GPU-filling or few-SM (communication) is not
	// one whose kernels all fill sm_util/gpu_util of the GPU.
	FullSMShare float64 `json:"full_sm_share,omitempty"`
}

// Source records where an imported profile came from and what the trace held,
// so that a reader can check the import against the trace.
type Source struct {
	Trace        string  `json:"trace,omitempty"`
	Format       string  `json:"format,omitempty"`
	Unit         string  `json:"unit,omitempty"`
	Kernels      int     `json:"kernels"`
	KernelTimeUS float64 `json:"kernel_time_us"`
	SpanUS       float64 `json:"span_us"`
	Streams      int     `json:"streams,omitempty"`
}

// Profile is one workload's solo behaviour on one device (colocd.profile/v1).
type Profile struct {
	Format    string   `json:"format"`
	Name      string   `json:"name"`
	Kind      Kind     `json:"kind"`
	Device    Device   `json:"device"`
	MemoryMiB float64  `json:"memory_mib,omitempty"`
	Ops       []Op     `json:"ops,omitempty"`
	Summary   *Summary `json:"summary,omitempty"`
	Notes     []string `json:"notes,omitempty"`
	Source    *Source  `json:"source,omitempty"`
}

// Bounds on a profile's numbers, besides the durations and fractions that
// every input document shares (errors.go). Each keeps a number from outside
// finite and small enough for the arithmetic it meets.
const (
	// MaxMemoryMiB bounds memory_mib, here and in an admission request:
	// 16 TiB, far above any GPU's memory (admission then denies the job for
	// want of memory), and small enough that the figure rounded up to whole
	// MiB is an exact int and "0=<MiB>M" in an MPS client's environment
	// never overflows.
	MaxMemoryMiB = 16 << 20
	// MaxDeviceSMs bounds device.sms, some 70 times the SM count of today's
	// largest GPUs.
	MaxDeviceSMs = 10_000
	// MinMeanOpUS is the shortest mean op, in µs: a unit must last at least
	// this much per op. A simulated context completes one event per op and
	// a trainer loops its unit without end, so this caps the events of one
	// context at 1e8 per simulated second, whatever the ops. Single ops may
	// still last 0 (the importer's merged timeline makes them); 10 ns is ten
	// times a trace's resolution, and real kernels last microseconds.
	MinMeanOpUS = 0.01
)

// Validate checks every field and returns a *field.List naming each bad
// one, or nil.
func (p *Profile) Validate() error {
	var c fieldChecker
	if p.Format != ProfileFormat {
		c.add("format", fmt.Sprintf("%q", ProfileFormat), fmt.Sprintf("%q", p.Format))
	}
	if strings.TrimSpace(p.Name) == "" {
		c.add("name", "a non-empty name", `""`)
	}
	if p.Kind != KindInference && p.Kind != KindTraining {
		c.add("kind", `"inference" or "training"`, fmt.Sprintf("%q", p.Kind))
	}
	if p.Device.SMs < 0 || p.Device.SMs > MaxDeviceSMs {
		c.add("device.sms", fmt.Sprintf("an SM count in [0, %d] (0: unknown)", MaxDeviceSMs), fmt.Sprint(p.Device.SMs))
	}
	if !(p.MemoryMiB >= 0 && p.MemoryMiB <= MaxMemoryMiB) {
		c.add("memory_mib", fmt.Sprintf("MiB in [0, %d] (16 TiB; 0 or absent: unknown)", MaxMemoryMiB), fmtFloat(p.MemoryMiB))
	}
	for i := range p.Ops {
		p.Ops[i].check(&c, i)
	}
	if p.Summary != nil {
		p.Summary.check(&c, p.Kind)
	}
	if len(p.Ops) == 0 && p.Summary == nil {
		c.add("ops", "at least one op, or a summary", "no ops and no summary")
	}
	if len(p.Ops) > 0 {
		var busy, unit float64
		for _, op := range p.Ops {
			busy += op.DurUS
			unit += op.DurUS + op.GapUS
		}
		least := max(MinUnitUS, float64(len(p.Ops))*MinMeanOpUS)
		if busy <= 0 {
			c.add("ops", "at least one op with dur_us > 0", "total GPU time 0")
		} else if unit < least {
			c.add("ops", fmt.Sprintf("a unit (the sum of gap_us and dur_us) of at least 1 µs and %g µs per op (%d ops: %g µs)",
				MinMeanOpUS, len(p.Ops), least), fmtFloat(unit))
		}
	}
	if p.Source != nil {
		p.Source.check(&c)
	}
	return c.err(fmt.Sprintf("profile %q", p.Name))
}

// check validates op i. Field names are built only for a failing op: a
// real profile has hundreds of ops and is validated on every admission.
func (op *Op) check(c *fieldChecker, i int) {
	ok := func(v float64) bool { return v >= 0 && v <= 1 }
	if op.DurUS >= 0 && op.DurUS <= MaxDurationUS && op.GapUS >= 0 && op.GapUS <= MaxDurationUS &&
		op.SM > 0 && op.SM <= 1 && ok(op.Occupancy) && (op.DRAM == nil || ok(*op.DRAM)) && (op.L2 == nil || ok(*op.L2)) &&
		(op.Waves == 0 || op.Waves >= 1 && op.Waves <= MaxWaves) {
		return
	}
	at := fmt.Sprintf("ops[%d]", i)
	c.duration(at+".dur_us", op.DurUS)
	c.duration(at+".gap_us", op.GapUS)
	if !(op.SM > 0 && op.SM <= 1) {
		c.add(at+".sm", "a fraction in (0,1]: the share of the SMs the kernel fills alone", fmtFloat(op.SM))
	}
	c.fraction(at+".occupancy", op.Occupancy)
	if op.DRAM != nil {
		c.fraction(at+".dram", *op.DRAM)
	}
	if op.L2 != nil {
		c.fraction(at+".l2", *op.L2)
	}
	if !(op.Waves == 0 || op.Waves >= 1 && op.Waves <= MaxWaves) {
		c.add(at+".waves", "a count of block rounds in [1, 1e9] (0: unknown)", fmtFloat(op.Waves))
	}
}

// MaxWaves bounds Op.Waves.
const MaxWaves = 1e9

// check validates the figures an importer recorded: informational, but
// numbers from outside all the same.
func (s *Source) check(c *fieldChecker) {
	if s.Kernels < 0 {
		c.add("source.kernels", "a count ≥ 0", fmt.Sprint(s.Kernels))
	}
	if s.Streams < 0 {
		c.add("source.streams", "a count ≥ 0", fmt.Sprint(s.Streams))
	}
	c.nonNegative("source.kernel_time_us", s.KernelTimeUS)
	c.nonNegative("source.span_us", s.SpanUS)
}

func (s *Summary) check(c *fieldChecker, kind Kind) {
	for _, f := range []struct {
		field string
		v     float64
	}{{"summary.latency_ms", s.LatencyMS}, {"summary.iteration_ms", s.IterationMS}} {
		if !(f.v == 0 || f.v >= MinUnitUS/1000 && f.v <= MaxDurationUS/1000) {
			c.add(f.field, "a time in [0.001, 3.6e6] ms (1 µs to one hour)", fmtFloat(f.v))
		}
	}
	if kind == KindInference && !(s.LatencyMS > 0) {
		c.add("summary.latency_ms", "the solo latency of one request in ms (> 0) for an inference profile", fmtFloat(s.LatencyMS))
	}
	if !(s.GPUUtil > 0 && s.GPUUtil <= 1) {
		c.add("summary.gpu_util", "a fraction in (0,1]", fmtFloat(s.GPUUtil))
	}
	c.fraction("summary.mem_util", s.MemUtil)
	if !(s.SMUtil >= 0 && s.SMUtil <= s.GPUUtil) {
		c.add("summary.sm_util", "a fraction in [0, gpu_util] (0: every kernel fills the GPU)", fmtFloat(s.SMUtil))
	}
	c.fraction("summary.full_sm_share", s.FullSMShare)
	if s.FullSMShare > 0 && (s.SMUtil <= 0 || s.GPUUtil > 0 && s.FullSMShare > s.SMUtil/s.GPUUtil+0.01) {
		c.add("summary.full_sm_share", "with sm_util, a fraction of busy time at most sm_util/gpu_util (the kernels that fill the GPU are part of the SM activity)", fmtFloat(s.FullSMShare))
	}
	if !(s.BlockUS == 0 || s.BlockUS > 0 && s.BlockUS <= MaxDurationUS) {
		c.add("summary.block_us", "a block time in (0, 3.6e9] µs (0: unknown)", fmtFloat(s.BlockUS))
	}
	if !(s.KernelUS == 0 || s.KernelUS >= 1 && s.KernelUS <= MaxDurationUS) {
		c.add("summary.kernel_us", "a mean kernel length in [1, 3.6e9] µs (0: the default)", fmtFloat(s.KernelUS))
	}
}

// ParseProfile decodes and validates one profile document. Unknown keys are
// errors, so that a misspelt key is caught instead of silently ignored.
func ParseProfile(data []byte) (*Profile, error) { return parseDocument[Profile]("profile", data) }

// LoadProfile reads and validates the profile at path.
func LoadProfile(path string) (*Profile, error) { return loadDocument("profile", path, ParseProfile) }

// SaveProfile validates p and writes it to path atomically (temporary file,
// then rename), so that a reader never sees half a profile.
func SaveProfile(path string, p *Profile) error { return saveDocument("profile", path, p) }

// IterationKnown reports whether the profile defines an iteration (or request)
// length; a training summary with no iteration_ms does not.
func (p *Profile) IterationKnown() bool {
	return len(p.Ops) > 0 || p.Summary == nil || p.Kind != KindTraining || p.Summary.IterationMS > 0
}

// SoloUS is the solo length of one unit (request or iteration) in µs: the sum
// of every op's gap and duration.
func (p *Profile) SoloUS() float64 { return opsUS(p.Expanded()) }

// FitUnit scales every op's host gap by one factor so that the unit (the
// sum of the ops' gaps and durations) lasts unitMS. A profiler slows the
// host: a traced unit's gaps (launches, Python, syncs) run longer than the
// workload's own, while its kernels keep their length. Given the unit timed
// without the profiler (a back-to-back request, a training iteration), the
// gaps shrink back and the kernels stay as traced. It returns the factor;
// the error names the field: unit_ms must be at least the kernels' busy
// time, and a unit with no gaps cannot change length.
func (p *Profile) FitUnit(unitMS float64) (float64, error) {
	if len(p.Ops) == 0 {
		return 0, unitError("a profile with ops (this one is a summary)", unitMS)
	}
	var busy, gaps float64
	for _, op := range p.Ops {
		busy += op.DurUS
		gaps += op.GapUS
	}
	want := unitMS * 1000
	if !(want >= busy) || math.IsInf(want, 0) {
		return 0, unitError(fmt.Sprintf("at least the kernels' busy time, %.3f ms", busy/1000), unitMS)
	}
	if gaps <= 0 {
		if want == busy {
			return 1, nil
		}
		return 0, unitError(fmt.Sprintf("the kernels' busy time, %.3f ms (the unit has no host gaps to scale)", busy/1000), unitMS)
	}
	k := (want - busy) / gaps
	for i := range p.Ops {
		p.Ops[i].GapUS = math.Round(p.Ops[i].GapUS*k*1000) / 1000
	}
	return k, nil
}

func unitError(want string, unitMS float64) error {
	return &field.Error{Path: "unit_ms", Want: want, Got: fmt.Sprint(unitMS)}
}
