package predictor

import "math"

// Summary expansion: the one rule that turns a summary-only profile into
// ops, derived from the real traces in testdata/kineto (docs/profiles.md
// gives the figures).
const (
	// SummaryKernelUS is the length of one synthetic kernel unless the
	// summary gives its own (kernel_us): the mean kernel of the traces
	// measured is 108–145 µs.
	SummaryKernelUS = 125.0
	// SummaryMaxKernels caps the synthetic kernels per unit.
	SummaryMaxKernels = 1000
	// SummaryLaunchGapUS is the idle time before each kernel (launch and
	// dependency gaps): 99.7 % of a busy trace's gaps are under 20 µs,
	// with a mean of 1.1 µs.
	SummaryLaunchGapUS = 1.0
	// SummaryLongGapUS is the mean size of the long gaps (host work, data
	// loading, synchronisation) the rest of the idle time comes in: the
	// mean gap above 200 µs of the traces measured is about 2 ms.
	SummaryLongGapUS = 2000.0
	// StreamIterationMS is the nominal unit of a trainer with no iteration time.
	StreamIterationMS = 100.0
	// minSMShare is the least SM share a synthetic kernel gets: about one
	// SM of a data-centre GPU.
	minSMShare = 0.01
)

// Expanded returns the profile's ops, synthesising them from the summary when
// the profile has none (ops win when both exist). The rule (docs/profiles.md):
// the unit lasts T = latency_ms (inference) or iteration_ms (training; when
// absent, StreamIterationMS and the trainer is a continuous stream whose
// iteration time is not reported). Busy time B = gpu_util·T is split into
// n = clamp(round(B/K), 1, 1000) equal kernels, K = kernel_us or 125 µs,
// each after a launch gap of min(1 µs, I/n), I = T − B the idle time. The
// rest of the idle time comes in L = clamp(round(rest/2 ms), 1, max(1, n/3))
// long gaps whose sizes fall as 1/j (as in the traces); the largest opens
// the unit, the others take the slots every n/L kernels in a stride order
// that mixes large and small.
// sm = min(1, sm_util/gpu_util) (1 without sm_util), occupancy = 1 and
// dram = min(1, mem_util/gpu_util); with sm_util and full_sm_share f, a
// fraction f of the kernels, spread evenly, fill the GPU (sm = 1) and the
// others share the rest of the SM activity. With block_us, each kernel runs
// max(1, dur/block_us) waves, so that a co-runner waits behind blocks of
// min(dur, block_us) as behind the traced kernels (the MPS head-of-line
// wait); without it, none.
func (p *Profile) Expanded() []Op {
	if len(p.Ops) > 0 || p.Summary == nil {
		return p.Ops
	}
	s := p.Summary
	unitMS := s.LatencyMS
	if p.Kind == KindTraining {
		unitMS = s.IterationMS
		if unitMS <= 0 {
			unitMS = StreamIterationMS
		}
	}
	unitUS := unitMS * 1000
	busy := s.GPUUtil * unitUS
	idle := unitUS - busy
	k := SummaryKernelUS
	if s.KernelUS > 0 {
		k = s.KernelUS
	}
	n := max(1, min(int(math.Round(busy/k)), SummaryMaxKernels))
	dram := math.Min(1, s.MemUtil/s.GPUUtil)
	sm := 1.0
	if s.SMUtil > 0 {
		sm = math.Min(1, s.SMUtil/s.GPUUtil)
	}
	ops := make([]Op, n)
	var waves float64
	if s.BlockUS > 0 {
		waves = max(1, busy/float64(n)/s.BlockUS)
	}
	// With full_sm_share f, a fraction f of the kernels (spread evenly)
	// fill the GPU and the others share the rest of the SM activity.
	f := min(s.FullSMShare, sm)
	split := f > 0 && s.SMUtil > 0
	full := func(i int) bool { return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f) }
	others := sm
	if split {
		// The others share what the m full kernels leave of n·sm, so that
		// the mean SM share stays sm_util/gpu_util.
		m := int(math.Floor(float64(n) * f))
		if m < n {
			others = min(1, max(minSMShare, (float64(n)*sm-float64(m))/float64(n-m)))
		}
	}
	for i := range ops {
		d := dram
		opSM := sm
		if split {
			opSM = others
			if full(i) {
				opSM = 1
			}
		}
		ops[i] = Op{Name: "summary", DurUS: busy / float64(n), SM: opSM, Occupancy: 1, DRAM: &d, Waves: waves}
	}
	SpreadIdle(ops, idle)
	return ops
}

// SpreadIdle sets the gaps of ops (at least one) so that they add up to
// idleUS, by the summary rule (Expanded): a launch gap of min(1 µs,
// idleUS/n) before each op, and the rest in L = clamp(round(rest/2 ms), 1,
// max(1, n/3)) long gaps whose sizes fall as 1/j, the largest opening the
// unit and the others every n/L ops in a stride order. It is how an
// importer whose source records no host gaps (Nsight Compute times each
// kernel alone) lays out a unit's measured idle time.
func SpreadIdle(ops []Op, idleUS float64) {
	n := len(ops)
	launch := min(SummaryLaunchGapUS, idleUS/float64(n))
	for i := range ops {
		ops[i].GapUS = launch
	}
	rest := idleUS - launch*float64(n)
	if rest > 0 {
		l := max(1, min(int(math.Round(rest/SummaryLongGapUS)), max(1, n/3)))
		var h float64 // the harmonic number H_l
		for j := 1; j <= l; j++ {
			h += 1 / float64(j)
		}
		// The largest opens the unit; the others take the slots every n/l
		// kernels in a stride order, so that large and small gaps mix all
		// through the unit and no stretch of it is denser than another.
		m := l - 1
		stride := strideFor(m)
		for j := 1; j <= l; j++ {
			slot := 0
			if j > 1 {
				slot = 1 + (j-2)*stride%m
			}
			ops[slot*n/l].GapUS += rest / (float64(j) * h)
		}
	}
}

// Summarize is the summary a user who measured this profile's workload
// would write: the unit's length (latency_ms or iteration_ms), the
// fraction of it the GPU is busy, the fraction its memory is (each
// kernel's DRAM intensity, estimated from its name where the profile has
// none, as the MPS model does), the fraction its SMs are (each kernel's
// sm), the mean kernel length, the share of busy time in kernels that
// fill every SM, and, from a profile with waves, the block time of those
// kernels (Summary.BlockUS). A summary-only profile returns its own
// summary.
func (p *Profile) Summarize() Summary {
	if len(p.Ops) == 0 && p.Summary != nil {
		return *p.Summary
	}
	var busy, idle, mem, sm, hol, holW, full, fullHol float64
	for i := range p.Ops {
		op := &p.Ops[i]
		busy += op.DurUS
		idle += op.GapUS
		dram, _, _ := memoryIntensity(op, classify(op.Name))
		mem += op.DurUS * dram
		sm += op.DurUS * op.SM
		var blk float64
		if op.Waves > 0 {
			blk = op.Occupancy * op.DurUS / op.Waves
			hol += op.DurUS * op.SM * blk
		}
		holW += op.DurUS * op.SM
		if op.SM >= 0.99 {
			full += op.DurUS
			fullHol += op.DurUS * blk
		}
	}
	if full > 0 {
		// A co-runner waits whole only for the blocks of kernels that
		// fill every SM; next to one on few SMs it starts on those left
		// free (chargeHeadOfLine).
		hol, holW = fullHol, full
	}
	t := busy + idle
	s := Summary{GPUUtil: busy / t, MemUtil: mem / t, SMUtil: sm / t, KernelUS: busy / float64(len(p.Ops))}
	if hol > 0 {
		s.BlockUS = hol / holW
	}
	s.FullSMShare = full / busy
	if p.Kind == KindTraining {
		s.IterationMS = t / 1000
	} else {
		s.LatencyMS = t / 1000
	}
	return s
}

// strideFor is a step through m slots that visits each once (coprime with
// m) and lands far from the last: the one nearest m/φ.
func strideFor(m int) int {
	if m <= 2 {
		return 1
	}
	best := 1
	target := float64(m) / math.Phi
	for k := 1; k < m; k++ {
		if gcd(k, m) == 1 && math.Abs(float64(k)-target) < math.Abs(float64(best)-target) {
			best = k
		}
	}
	return best
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
