package predictor

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// MPSParams are the stage-2 contention coefficients of the MPS model: a
// running kernel's rate is divided by 1 + DRAM·f_dram + L2·f_l2 + Kernels·f_kernels
// (features in docs/predictor.md).
type MPSParams struct {
	DRAM    float64 `json:"dram"`
	L2      float64 `json:"l2"`
	Kernels float64 `json:"kernels"`
}

// MaxCoefficient bounds each stage-2 coefficient: far above any plausible
// contention, and small enough that rates stay finite.
const MaxCoefficient = 1000.0

// MPSFeatures names the stage-2 features, in the order of MPSParams.
var MPSFeatures = []string{"dram", "l2", "kernels"}

// Vector returns the coefficients in the order of MPSFeatures.
func (p MPSParams) Vector() [3]float64 { return [3]float64{p.DRAM, p.L2, p.Kernels} }

// MPSParamsFrom is the inverse of Vector.
func MPSParamsFrom(v []float64) MPSParams { return MPSParams{DRAM: v[0], L2: v[1], Kernels: v[2]} }

// Validate names every coefficient that is out of range.
func (p MPSParams) Validate() error {
	var c fieldChecker
	for i, v := range p.Vector() {
		if !(v >= 0 && v <= MaxCoefficient) {
			c.add("mps.coefficients."+MPSFeatures[i], "a coefficient in [0, 1000]", fmtFloat(v))
		}
	}
	return c.err("MPS parameters")
}

// Coefficients returns the calibration's MPS coefficients as parameters;
// an absent section gives zeros (stage 1 alone).
func (m *MPSCalibration) Params() MPSParams {
	if m == nil {
		return MPSParams{}
	}
	return MPSParams{DRAM: m.Coefficients["dram"], L2: m.Coefficients["l2"], Kernels: m.Coefficients["kernels"]}
}

// DefaultDeviceSMs is the SM count assumed when neither the scenario nor the
// inference profile names one; percentages are then rounded to 1 % steps.
const DefaultDeviceSMs = 100

// smCap is the SM fraction an MPS client at pct may use: the percentage
// rounded down to whole SMs of the device, at least one SM.
func smCap(pct float64, sms int) float64 {
	n := math.Floor(pct/100*float64(sms) + 1e-9)
	return max(n, 1) / float64(sms)
}

// Estimates used when a kernel's memory intensities are unknown, by the
// kernel's name (docs/predictor.md). They are rough: import Nsight Compute
// figures for anything that matters.
const (
	estComputeDRAM, estComputeL2 = 0.25, 0.4 // GEMM and convolution kernels
	estMemoryDRAM, estMemoryL2   = 0.7, 0.5  // element-wise, reductions, copies, normalisation
	estOtherDRAM, estOtherL2     = 0.4, 0.4
)

var (
	computeKernelWords = []string{"gemm", "conv", "matmul", "cutlass", "cublas", "xmma", "wgrad", "dgrad", "fprop", "mma", "attention", "flash"}
	memoryKernelWords  = []string{"elementwise", "vectorized", "reduce", "copy", "cat", "fill", "softmax", "norm", "index", "gather", "scatter", "transpose", "embedding", "dropout"}
)

// kernelClass is what a kernel's name says about its memory intensity.
type kernelClass uint8

const (
	classOther kernelClass = iota
	classCompute
	classMemory
)

// classify reads a kernel's class from its name.
func classify(name string) kernelClass {
	name = strings.ToLower(name)
	switch {
	case containsAny(name, computeKernelWords):
		return classCompute
	case containsAny(name, memoryKernelWords):
		return classMemory
	}
	return classOther
}

// memoryIntensity returns the op's DRAM and L2 intensities, estimating the
// ones it lacks from its kernel class; est reports whether any was estimated.
func memoryIntensity(op *Op, class kernelClass) (dram, l2 float64, est bool) {
	ed, el := estOtherDRAM, estOtherL2
	switch class {
	case classCompute:
		ed, el = estComputeDRAM, estComputeL2
	case classMemory:
		ed, el = estMemoryDRAM, estMemoryL2
	}
	dram, l2 = ed, el
	if op.DRAM != nil {
		dram = *op.DRAM
		el = dram // a summary op, or a DRAM figure alone: L2 follows DRAM
	}
	if op.L2 != nil {
		l2 = *op.L2
	} else {
		l2 = el
	}
	return dram, l2, op.DRAM == nil || op.L2 == nil
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// mpsOp is what the MPS model needs of one op besides its duration.
type mpsOp struct {
	sm       float64 // SM demand: the fraction of the device it fills alone, at least one SM
	u        float64 // SMs it may use: min(sm, its client's cap)
	alone    float64 // its rate when running alone: u / sm
	invAlone float64 // sm / u
	dram     float64 // DRAM intensity
	l2       float64 // L2 intensity
	blockUS  float64 // one thread block's time (dur/waves) × occupancy; 0: unknown
	ownUS    float64 // one thread block's time, dur/waves (dur when waves are unknown)
}

// mpsContext holds the MPS view of one context's ops.
type mpsContext struct {
	ops []mpsOp
	// aloneCum[i] is the time from the unit's start to op i's gap when the
	// context runs alone at its cap (gaps, and kernels at their alone
	// rates); aloneCycle, one whole unit's.
	aloneCum   []float64
	aloneCycle float64
	capSM      float64 // the client's cap: an op at or above it has u = capSM
	// pair is what runPair reads of each op, in one 64-byte record, with
	// the products of the run's coefficients that its stage 2 starts with
	// (setPair).
	pair []pairOp
}

// pairOp is one op as runPair reads it: mpsOp's fields that the loop
// uses, and bd, bl, bk, the first products of its stage-2 terms (β_dram·dram,
// β_l2·l2, β_kernels·u). Go evaluates a·b·c as (a·b)·c, so taking those
// products once per run gives the same factors bit for bit.
type pairOp struct {
	u, alone, invAlone, dram, l2 float64
	bd, bl, bk                   float64
}

// setPair fills c.pair from c.ops for the coefficients beta.
func (c *mpsContext) setPair(beta [3]float64) {
	if cap(c.pair) < len(c.ops) {
		c.pair = make([]pairOp, len(c.ops))
	}
	c.pair = c.pair[:len(c.ops)]
	for i := range c.ops {
		o := &c.ops[i]
		c.pair[i] = pairOp{u: o.u, alone: o.alone, invAlone: o.invAlone, dram: o.dram, l2: o.l2,
			bd: beta[0] * o.dram, bl: beta[1] * o.l2, bk: beta[2] * o.u}
	}
}

func (c *mpsContext) load(ops []Op, capSM float64, sms int, classes map[string]kernelClass) (estimated int) {
	if cap(c.ops) < len(ops) {
		c.ops = make([]mpsOp, len(ops))
	}
	c.ops = c.ops[:len(ops)]
	c.aloneCum = growFloats(c.aloneCum, len(ops))
	oneSM := 1 / float64(sms)
	c.aloneCycle, c.capSM = 0, capSM
	for i := range ops {
		c.aloneCum[i] = c.aloneCycle
		o := &c.ops[i]
		o.sm = max(ops[i].SM, oneSM)
		o.u = min(o.sm, capSM)
		o.alone = o.u / o.sm
		o.invAlone = o.sm / o.u
		class := classOther
		if ops[i].DRAM == nil || ops[i].L2 == nil {
			var ok bool
			if class, ok = classes[ops[i].Name]; !ok {
				class = classify(ops[i].Name)
				classes[ops[i].Name] = class
			}
		}
		o.blockUS, o.ownUS = 0, ops[i].DurUS
		if w := ops[i].Waves; w > 0 {
			o.ownUS = ops[i].DurUS / max(w, 1)
			// A block holds its SM's warp slots in proportion to the
			// kernel's occupancy: at full occupancy another client's block
			// must wait for it, at low occupancy it mostly finds room
			// beside it (measured on an H200: docs/accuracy.md).
			o.blockUS = ops[i].DurUS / w * ops[i].Occupancy
		}
		var est bool
		o.dram, o.l2, est = memoryIntensity(&ops[i], class)
		if est {
			estimated++
		}
		c.aloneCycle += ops[i].GapUS + ops[i].DurUS*o.invAlone
	}
	return estimated
}

// mpsSim runs the MPS model: a fluid simulation in which the kernels running
// at each instant share SMs and DRAM bandwidth (stage 1), slowed further by a
// contention factor linear in overlap features (stage 2). It keeps its
// buffers between runs. Not safe for concurrent use.
type mpsSim struct {
	simState
	mctx []mpsContext
	// per-event scratch, indexed by position in running
	running        []int
	cur            []*mpsOp
	rate, inv, end []float64
	// classes caches kernel classes by name across runs.
	classes   map[string]kernelClass
	estimated int // ops whose memory intensities were estimated in the last run
	// capScale[a*n+b], once built in a run (capScaleOK), is for each op of
	// context a what runPair computes of its SM share next to a kernel of
	// context b that fills b's cap (scaleNextToCap).
	capScale   [][]overScale
	capScaleOK []bool
	// blocks is set when some op knows its block time: serving kernels
	// then wait for co-runners' blocks (headOfLine); holPending[c] marks
	// a serving context whose current op has not been charged that wait.
	blocks     bool
	holPending []bool
}

// run simulates the inference services (the first contexts, service j
// serving arrivals[j]) while each training workload loops, all running
// concurrently under MPS with the given per-context active-thread
// percentages (services first).
func (s *mpsSim) run(services [][]Op, training [][]Op, arrivals [][]float64, pcts []float64, sms int, p MPSParams) (*simResult, error) {
	if err := s.reset(services, training, arrivals); err != nil {
		return nil, err
	}
	n := len(s.ctx)
	if cap(s.mctx) < n {
		s.mctx = make([]mpsContext, n)
	}
	s.mctx = s.mctx[:n]
	if s.classes == nil {
		s.classes = map[string]kernelClass{}
	}
	s.estimated = 0
	k := len(services)
	for j, ops := range services {
		s.estimated += s.mctx[j].load(ops, smCap(pcts[j], sms), sms, s.classes)
	}
	for i, ops := range training {
		s.estimated += s.mctx[k+i].load(ops, smCap(pcts[k+i], sms), sms, s.classes)
	}
	s.blocks = false
	for c := range s.mctx {
		for i := range s.mctx[c].ops {
			if s.mctx[c].ops[i].blockUS > 0 {
				s.blocks = true
			}
		}
	}
	if cap(s.capScale) < n*n {
		s.capScale = make([][]overScale, n*n)
		s.capScaleOK = make([]bool, n*n)
	}
	s.capScale, s.capScaleOK = s.capScale[:n*n], s.capScaleOK[:n*n]
	clear(s.capScaleOK)
	if cap(s.holPending) < n {
		s.holPending = make([]bool, n)
	}
	s.holPending = s.holPending[:n]
	for c := range s.holPending {
		s.holPending[c] = c < k
	}
	if cap(s.cur) < n {
		s.cur = make([]*mpsOp, n)
	}
	s.cur = s.cur[:n]
	s.rate = growFloats(s.rate, n)
	s.inv = growFloats(s.inv, n)
	s.end = growFloats(s.end, n)
	beta := p.Vector()
	for c := range s.mctx {
		s.mctx[c].setPair(beta)
	}

	now := 0.0
	for !s.done() {
		s.running = s.running[:0]
		next := inf
		if s.blocks {
			s.chargeHeadOfLine(now)
		}
		for c, t := range s.ready {
			if t <= now {
				s.running = append(s.running, c)
			} else if t < next {
				next = t
			}
		}
		switch len(s.running) {
		case 0:
			now = next // every context is in a gap or waiting for a request
		case 1:
			now = s.runAlone(s.running[0], now, next)
		case 2:
			now = s.runPair(s.running[0], s.running[1], now, next)
		default:
			now = s.runShared(now, next, beta)
		}
	}
	return s.result(now)
}

// skipAloneIterations lets runAlone skip a lone context's kernels and a
// lone trainer's whole iterations; tests turn it off to check that skipping
// changes nothing.
var skipAloneIterations = true

// runAlone advances context c, the only one with work, until another
// context's work is ready at next (or the simulation ends). Alone, a kernel
// runs at its cap's rate and meets no contention, so the kernels that end
// before next are found by a binary search on the unit's alone timeline
// instead of one by one (each still counts as an event); the last kernel of
// a unit completes the ordinary way.
func (s *mpsSim) runAlone(c int, now, next float64) float64 {
	ctx, ops, cum := &s.ctx[c], s.mctx[c].ops, s.mctx[c].aloneCum
	last := len(ops) - 1
	for {
		if s.blocks && c < s.nsvc {
			s.holPending[c] = false // it starts (or goes on) alone: nothing to wait for
		}
		a := ops[ctx.idx].alone
		end := now + ctx.rem/a
		if end > next {
			ctx.rem -= (next - now) * a
			s.res.events++
			return next
		}
		if i := ctx.idx; skipAloneIterations && i+1 < last {
			// Op j ends at base + cum[j+1]; take every op up to the last
			// one (but the unit's final op) that ends by next.
			base := end - cum[i+1]
			j := i + sort.Search(last-1-i, func(k int) bool { return base+cum[i+k+2] > next })
			if j > i {
				s.res.events += j - i
				ctx.idx = j
				end = base + cum[j+1]
			}
		}
		now = end
		if i := ctx.idx + 1; i < len(ctx.dur) { // complete(), its common case inlined
			s.res.events++
			ctx.idx, ctx.rem, s.ready[c] = i, ctx.dur[i], now+ctx.gap[i]
		} else if s.complete(c, now); s.done() {
			return now
		} else if c >= s.nsvc && skipAloneIterations {
			// A trainer alone at the start of an iteration: every whole
			// iteration that ends before another context has work takes
			// exactly aloneCycle, so skip them instead of stepping through
			// their kernels. (Not counted as events: nothing is simulated.)
			if cyc := s.mctx[c].aloneCycle; now+cyc <= next {
				k := math.Floor((next - now) / cyc)
				ctx.iters += int(k)
				now += k * cyc
				s.ready[c] = now + ctx.gap[0]
			}
		}
		if t := s.ready[c]; t > now {
			if t >= next {
				s.markHeadOfLine(c) // its next op starts later, maybe next to others
				return now          // in a gap when the other context wakes: the caller moves on
			}
			now = t
		}
	}
}

// runPair is runShared for the common case of exactly two running kernels
// (the inference server and one trainer): it keeps advancing them, kernel
// after kernel, while both have work and nobody else does, with the
// arithmetic of rates written out for two. The two contexts' current op
// and remaining work, and the event count, live in locals while it runs
// (through the pointers the compiler reloads and stores them at every
// step) and are written back before anything else reads them: s.complete
// and the return.
func (s *mpsSim) runPair(a, b int, now, next float64) float64 {
	ca, cb := &s.ctx[a], &s.ctx[b]
	opsA, opsB := s.mctx[a].pair, s.mctx[b].pair
	durA, gapA, durB, gapB := ca.dur, ca.gap, cb.dur, cb.gap
	readyA, readyB := &s.ready[a], &s.ready[b]
	idxA, remA, idxB, remB := ca.idx, ca.rem, cb.idx, cb.rem
	events := s.res.events
	scaleA, capB := s.scaleNextToCap(a, b), s.mctx[b].capSM
	// Invariant while it runs (s.complete changes neither): whether to
	// take gaps here, and done's budget and stop channel.
	gaps, blocks := pairGaps, s.blocks
	budget, canStop := maxEvents, s.stop != nil
	done := func() bool { // s.doneAt(events), its common answer without the call
		if s.pending != 0 && events <= budget && (!canStop || events%cancelCheck != 0) {
			return false
		}
		return s.doneAt(events)
	}
	for {
		oa, ob := &opsA[idxA], &opsB[idxB]
		// (Plain comparisons rather than max: this is the hottest loop, and
		// the builtin's NaN handling costs here.)
		var over, scale float64
		if ob.u == capB {
			ov := &scaleA[idxA]
			over, scale = ov.over, ov.scale
		} else if over, scale = oa.u+ob.u, 1.0; over > 1 {
			scale = 1 / over
		} else {
			over = 1
		}
		ra, rb := oa.alone*scale, ob.alone*scale
		ia, ib := oa.invAlone*over, ob.invAlone*over
		if slow := oa.dram*ra + ob.dram*rb; slow > 1 {
			ds := 1 / slow
			if oa.dram > 0 {
				ra *= ds
				ia *= slow
			}
			if ob.dram > 0 {
				rb *= ds
				ib *= slow
			}
		}
		// Stage 2: each kernel's co-runner is the other one; β·x·y·r is
		// (β·x)·y·r, its first product taken once per run (pairOp).
		fa := 1 + oa.bd*ob.dram*rb + oa.bl*ob.l2*rb + ob.bk*scale
		fb := 1 + ob.bd*oa.dram*ra + ob.bl*oa.l2*ra + oa.bk*scale
		endA, endB := now+remA*ia*fa, now+remB*ib*fb
		t := next
		if endA < t {
			t = endA
		}
		if endB < t {
			t = endB
		}
		dt := t - now
		now = t
		doneA, doneB := endA <= t, endB <= t
		if !doneA && !doneB {
			events++ // another context's work is ready: rates change
		}
		// complete(), with its common case written out: too big for the
		// compiler to inline (cost 109, budget 80), and called once per
		// kernel. Measured against plain s.complete calls at all three
		// sites (8 interleaved runs each of BenchmarkPredictMPS, 2 cores):
		// the calls cost +12.7 % (p = 0.01) without PGO; with a default.pgo
		// from these benchmarks they came back to within noise of the
		// copies (p = 0.13), and PGO did not speed up the copies either
		// (p = 0.33). So the copies stay and no profile ships.
		if doneA {
			if i := idxA + 1; i < len(durA) {
				events++
				idxA, remA, *readyA = i, durA[i], now+gapA[i]
			} else {
				ca.idx, s.res.events = idxA, events
				s.complete(a, now)
				idxA, remA, events = ca.idx, ca.rem, s.res.events
			}
			s.markHeadOfLine(a) // its next op is not yet charged its wait
		} else {
			remA -= ra / fa * dt
		}
		if doneB {
			if i := idxB + 1; i < len(durB) {
				events++
				idxB, remB, *readyB = i, durB[i], now+gapB[i]
			} else {
				cb.idx, s.res.events = idxB, events
				s.complete(b, now)
				idxB, remB, events = cb.idx, cb.rem, s.res.events
			}
			s.markHeadOfLine(b)
		} else {
			remB -= rb / fb * dt
		}
		if blocks && gaps && (s.holPending[a] || s.holPending[b]) {
			// A serving context whose next op is ready now starts it next
			// to the other's resident blocks, charged as the main loop
			// charges it (it reads the contexts' current ops).
			ca.idx, cb.idx = idxA, idxB
			s.chargeHeadOfLine(now)
		}
		if gaps && !done() && t < next {
			// One of the two is in a gap (host work, a launch): the other
			// runs alone until it ends, as the main loop would have it do
			// in runAlone, step for step; the common case, a gap shorter
			// than the kernel it overlaps, stays here (most kernels are
			// followed by a gap, so this halves the trips through the main
			// loop). Anything else goes back to the main loop.
		wake:
			if inA, inB := !(*readyA <= now), !(*readyB <= now); inB && !inA {
				if wake := *readyB; wake < next {
					if rem, ok := aloneUntil(remA, opsA[idxA].alone, now, wake); ok {
						remA, now = rem, wake
						events++
					}
				}
			} else if inA && !inB {
				if wake := *readyA; wake < next {
					if rem, ok := aloneUntil(remB, opsB[idxB].alone, now, wake); ok {
						remB, now = rem, wake
						events++
					}
				}
			}
			if blocks && (s.holPending[a] || s.holPending[b]) && *readyA <= now && *readyB <= now {
				// The one that woke starts its op next to the other's
				// blocks: a wait is one more gap to take the same way.
				ca.idx, cb.idx = idxA, idxB
				s.chargeHeadOfLine(now)
				if *readyA > now || *readyB > now {
					goto wake
				}
			}
			if *readyA <= now && *readyB <= now {
				continue
			}
		}
		if done() || *readyA > now || *readyB > now || t >= next ||
			// Without gaps here, a serving context's next kernel meets the
			// co-runner's resident blocks in the main loop, which charges
			// the wait.
			blocks && !gaps && (doneA && a < s.nsvc || doneB && b < s.nsvc) {
			ca.idx, ca.rem, cb.idx, cb.rem, s.res.events = idxA, remA, idxB, remB, events
			return now
		}
	}
}

// overScale is runPair's SM oversubscription of a pair of kernels and its
// inverse: over = u_a + u_b and scale = 1/over when over > 1, else 1 and 1.
type overScale struct{ over, scale float64 }

// scaleNextToCap returns, for each op of context a, runPair's overScale
// next to an op of context b at b's cap (u = capSM, the usual case of a
// throttled trainer): the same sum and quotient, computed once per run
// instead of once per step, where the division was the head of the chain
// of arithmetic that decides which kernel ends first.
func (s *mpsSim) scaleNextToCap(a, b int) []overScale {
	k := a*len(s.mctx) + b
	if s.capScaleOK[k] {
		return s.capScale[k]
	}
	ops, capB := s.mctx[a].pair, s.mctx[b].capSM
	t := s.capScale[k]
	if cap(t) < len(ops) {
		t = make([]overScale, len(ops))
	}
	t = t[:len(ops)]
	for i := range ops {
		over, scale := ops[i].u+capB, 1.0
		if over > 1 {
			scale = 1 / over
		} else {
			over = 1
		}
		t[i] = overScale{over, scale}
	}
	s.capScale[k], s.capScaleOK[k] = t, true
	return t
}

// aloneUntil is runPair's step of one kernel running alone at rate, with
// rem of its work left at now, until wake, when the other context's gap
// ends: the work it has left then, and true, when it is still running at
// wake; false when it ends first. At rate 1, the common case, x/1 and x·1
// are x exactly: the division is skipped, not approximated. It is small
// enough for the compiler to inline into runPair's loop.
func aloneUntil(rem, rate, now, wake float64) (float64, bool) {
	if rate == 1 {
		return rem - (wake - now), now+rem > wake
	}
	return rem - (wake-now)*rate, now+rem/rate > wake
}

// pairGaps lets runPair take the other context's gaps itself: it advances
// the one of the two that has work alone through the other's gap, when the
// gap ends before next and before the lone kernel would, exactly what the
// main loop would then do (runAlone up to the gap's end, an event); and it
// charges a serving context's head-of-line wait when its op is ready,
// taking the wait as one more gap, as the main loop's chargeHeadOfLine
// would. A test turns it off to check that the main loop gives the same,
// bit for bit.
var pairGaps = true

// runShared advances the running kernels together to the next event: the
// first to finish at the current rates, or next, when another context's work
// is ready. A kernel whose finish time is the event's completes exactly:
// subtracting rate·dt could leave a crumb of work that, at simulated times of
// many seconds, no float step could remove.
func (s *mpsSim) runShared(now, next float64, beta [3]float64) float64 {
	for k, c := range s.running {
		s.cur[k] = &s.mctx[c].ops[s.ctx[c].idx]
	}
	s.rates(beta)
	for k, c := range s.running {
		s.end[k] = now + s.ctx[c].rem*s.inv[k]
		next = min(next, s.end[k])
	}
	dt := next - now
	completed := false
	for k, c := range s.running {
		if s.end[k] <= next {
			s.complete(c, next)
			s.markHeadOfLine(c)
			completed = true
		} else {
			s.ctx[c].rem -= s.rate[k] * dt
		}
	}
	if !completed {
		s.res.events++ // another context's work is ready: rates change
	}
	return next
}

// rates sets, for the running kernels (s.cur), their rate (solo work per µs)
// and its inverse. Stage 1: each kernel may use min(its SM demand, its
// client's cap); when the sum exceeds the device the shares shrink
// proportionally; a kernel progresses at share/demand of its solo speed, and
// when the kernels' DRAM demand at those speeds exceeds the bandwidth, the
// memory users slow down proportionally (roofline). Stage 2 divides each rate
// by 1 + β·f, f being the kernel's DRAM and L2 intensity times its
// co-runners' DRAM and L2 traffic, and the SMs its co-runners hold.
func (s *mpsSim) rates(beta [3]float64) {
	cur := s.cur[:len(s.running)]
	var sumU float64
	for _, o := range cur {
		sumU += o.u
	}
	over := max(sumU, 1) // SM oversubscription
	scale := 1 / over
	var demand float64
	for _, o := range cur {
		demand += o.dram * o.alone
	}
	demand *= scale
	slow := max(demand, 1) // DRAM oversubscription, for kernels that use DRAM
	dscale := 1 / slow
	var dram, l2 float64
	for k, o := range cur {
		rho := o.alone * scale
		if o.dram > 0 {
			rho *= dscale
		}
		s.rate[k] = rho
		dram += o.dram * rho
		l2 += o.l2 * rho
	}
	smTotal := sumU * scale
	for k, o := range cur {
		rho := s.rate[k]
		f := 1 + beta[0]*o.dram*(dram-o.dram*rho) + beta[1]*o.l2*(l2-o.l2*rho) + beta[2]*(smTotal-o.u*scale)
		inv := o.invAlone * over * f
		if o.dram > 0 {
			inv *= slow
		}
		s.inv[k] = inv
		s.rate[k] = rho / f
	}
}

// MPSUsed records the MPS settings a prediction was made with.
type MPSUsed struct {
	InferencePct float64   `json:"inference_pct"`
	TrainingPct  []float64 `json:"training_pct"`
	SMs          int       `json:"sms"`
	Coefficients MPSParams `json:"coefficients"`
	// EstimatedOps counts ops whose DRAM/L2 intensities were estimated.
	EstimatedOps int `json:"estimated_ops"`
}

// mpsPercentages validates the scenario's percentages and returns one per
// context: every inference service's (InferencePct) first, then the
// trainers'.
func (sc *Scenario) mpsPercentages() ([]float64, error) {
	var c fieldChecker
	inf := sc.InferencePct
	if inf == 0 {
		inf = 100
	}
	if !(inf > 0 && inf <= 100) {
		c.add("inference_pct", "an active-thread percentage in (0,100]", fmtFloat(inf))
	}
	var pcts []float64
	for range sc.services() {
		pcts = append(pcts, inf)
	}
	k := len(pcts)
	switch len(sc.TrainingPct) {
	case 0:
		for range sc.Training {
			pcts = append(pcts, 100)
		}
	case 1:
		for range sc.Training {
			pcts = append(pcts, sc.TrainingPct[0])
		}
	case len(sc.Training):
		pcts = append(pcts, sc.TrainingPct...)
	default:
		c.add("training_pct", fmt.Sprintf("one percentage for all training jobs or one per job (%d)", len(sc.Training)), fmt.Sprintf("%d values", len(sc.TrainingPct)))
	}
	for i, p := range pcts[k:] {
		if !(p > 0 && p <= 100) {
			c.add(fmt.Sprintf("training_pct[%d]", i), "an active-thread percentage in (0,100]", fmtFloat(p))
		}
	}
	if sc.DeviceSMs < 0 {
		c.add("device_sms", "an SM count ≥ 1 (0: from the inference profile)", fmt.Sprint(sc.DeviceSMs))
	}
	return pcts, c.err("scenario")
}

// deviceSMs is the SM count the MPS model rounds percentages to.
func (sc *Scenario) deviceSMs() int {
	switch {
	case sc.Instance != nil:
		return sc.Instance.SMs
	case sc.DeviceSMs > 0:
		return sc.DeviceSMs
	case sc.Inference.Device.SMs > 0:
		return sc.Inference.Device.SMs
	}
	return DefaultDeviceSMs
}

// PredictMPS predicts the scenario under MPS: every context runs
// concurrently, each limited to its active-thread percentage
// (Scenario.InferencePct, Scenario.TrainingPct), with stage-2 coefficients p.
func (pr *Predictor) PredictMPS(sc *Scenario, p MPSParams) (*Prediction, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if err := sc.checkBudget(ModeMPS); err != nil {
		return nil, err
	}
	pcts, err := sc.mpsPercentages()
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := pr.prepare(sc); err != nil {
		return nil, fmt.Errorf("predict mps: %w", err)
	}
	sms := sc.deviceSMs()
	k := len(pr.svcOps)
	res, err := pr.mps.run(pr.svcOps, pr.training, pr.arrivals, pcts, sms, p)
	if err != nil {
		return nil, fmt.Errorf("predict mps: %w", err)
	}
	estimated := pr.mps.estimated
	if sc.Instance != nil { // the instance's ops carry their estimates filled in
		estimated = 0
		for _, p := range sc.services() {
			estimated += estimatedOps(p)
		}
		for _, t := range sc.Training {
			estimated += estimatedOps(t)
		}
	}
	// Solo: the services without the trainers, at their own percentage.
	// For one service whose kernels the cap does not bind, that is the
	// plain FIFO queue the time-slicing model uses.
	var solo *simResult
	capSM := smCap(pcts[0], sms)
	if k > 1 || slices.ContainsFunc(pr.svcOps[0], func(op Op) bool { return op.SM > capSM }) {
		if solo, err = pr.soloMPS.run(pr.svcOps, nil, pr.arrivals, pcts[:k], sms, p); err != nil {
			return nil, fmt.Errorf("predict mps: %w", err)
		}
	}
	pred := pr.prediction(ModeMPS, sc, res, solo)
	pred.MPS = &MPSUsed{InferencePct: pcts[0], TrainingPct: slices.Clone(pcts[k:]), SMs: sms, Coefficients: p, EstimatedOps: estimated}
	return pred, nil
}

// markHeadOfLine notes that serving context c has a new op, not yet
// started: its last one completed.
func (s *mpsSim) markHeadOfLine(c int) {
	if s.blocks && c < s.nsvc {
		s.holPending[c] = true
	}
}

// chargeHeadOfLine delays each serving context whose op is ready at now and
// not yet charged by the wait for its co-runners' resident thread blocks
// (Op.Waves). A kernel launched next to another client's kernel starts at
// once on the SMs that kernel leaves free; only the part of its SM demand
// that finds no free SM waits. When the co-runners fill the device, the
// whole kernel waits for their blocks to retire, on average half a block;
// when they leave some SMs free, the blocks that found none start on the
// SMs that the kernel's own first blocks free, if that comes sooner. So a
// co-runner that holds a single SM for a long communication kernel delays
// a kernel that needs every SM by at most that SM's share of one of the
// kernel's own blocks, and a co-runner held to a lower active-thread
// percentage holds fewer SMs, so the wait falls with it. A co-runner whose
// block time is unknown costs none (the fluid model). Run by the main loop
// with the running set still to be formed.
func (s *mpsSim) chargeHeadOfLine(now float64) {
	for c := range s.nsvc {
		if !s.holPending[c] || s.ready[c] > now {
			continue
		}
		s.holPending[c] = false
		// held: the co-runners' SMs; block: their half-block waits,
		// weighted by the SMs each holds.
		var held, block float64
		for k, t := range s.ready {
			if k == c || t > now {
				continue
			}
			o := &s.mctx[k].ops[s.ctx[k].idx]
			held += o.u
			block += 0.5 * o.u * o.blockUS
		}
		var wait float64
		if op := &s.mctx[c].ops[s.ctx[c].idx]; held > 0 && op.u+held > 1 {
			// The share of its demand that finds no free SM, times the
			// co-runners' mean half-block wait, or its own block's time
			// when some SMs are free.
			wait = block / held
			if held < 1-1e-9 {
				wait = min(wait, op.ownUS)
			}
			wait *= min(1, (op.u+held-1)/op.u)
		}
		if wait > 0 {
			s.ready[c] = now + wait
		}
	}
}
