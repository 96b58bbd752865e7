package predictor

import (
	"errors"
	"fmt"
	"math"
)

// TimesliceParams are the device parameters of the time-slicing model.
type TimesliceParams struct {
	// SliceUS is the virtual time slice a context may hold the GPU while others wait.
	SliceUS float64 `json:"slice_us"`
	// SwitchUS is the cost of one context switch, during which nothing runs.
	SwitchUS float64 `json:"switch_us"`
	// HoldoverUS is how long an idle context keeps the GPU before it yields.
	HoldoverUS float64 `json:"holdover_us"`
}

// Validate names every parameter that is out of range.
func (p TimesliceParams) Validate() error {
	var c fieldChecker
	c.positive("timeslice.slice_us", p.SliceUS)
	c.nonNegative("timeslice.switch_us", p.SwitchUS)
	c.nonNegative("timeslice.holdover_us", p.HoldoverUS)
	return c.err("time-slicing parameters")
}

var inf = math.Inf(1)

// tsContext is one GPU context of the simulation: the inference server
// (index 0) or a training job. Ops are stored as parallel slices so the
// inner loop touches only what it needs.
type tsContext struct {
	dur, gap []float64
	cum      []float64 // cum[i]: solo time from the unit's start to op i's gap start
	cycle    float64   // solo length of one unit (request or iteration), µs
	idx      int       // current op
	rem      float64   // remaining busy time of the current op, µs
	iters    int       // completed training iterations
}

func (c *tsContext) load(ops []Op) {
	n := len(ops)
	c.dur = growFloats(c.dur, n)
	c.gap = growFloats(c.gap, n)
	c.cum = growFloats(c.cum, n)
	t := 0.0
	for i, op := range ops {
		c.dur[i], c.gap[i], c.cum[i] = op.DurUS, op.GapUS, t
		t += op.GapUS + op.DurUS
	}
	c.cycle = t
	c.idx, c.rem, c.iters = 0, 0, 0
}

func growFloats(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}

// tsResult is what one simulation run measured, in µs.
type tsResult struct {
	latency, service []float64 // per request
	endUS            float64   // completion of the last request
	progress         []float64 // training iterations done per training context (fractional)
	events           int       // kernel completions + preemptions + switches processed
}

// TimesliceSim runs the time-slicing simulation. It keeps its buffers between
// runs, so a caller that predicts many times (calibration, the admission
// search) allocates nothing per run after the first. Not safe for concurrent use.
type TimesliceSim struct {
	ctx   []tsContext
	ready []float64 // ready[c]: when context c's current op can start (inf: never)
	res   tsResult
}

// errEmptyUnit is returned when a workload has no GPU time at all.
var errEmptyUnit = errors.New("workload has no GPU time")

// run simulates inference (context 0) serving arrivals while each training
// workload loops, all sharing the GPU by round-robin time slicing.
//
// Scheduling rules (docs/predictor.md): the owner runs until its slice ends
// and another context has ready work; slices renew back to back while nobody
// waits, so a newcomer waits for the rest of the current slice. An owner with
// no ready work keeps the GPU for the hold-over, then yields to the next
// ready context in round-robin order (or at its slice boundary if sooner).
// Each switch costs SwitchUS with nothing running; kernels are preempted at
// slice end and resume where they stopped.
func (s *TimesliceSim) run(inference []Op, training [][]Op, arrivals []float64, p TimesliceParams) (*tsResult, error) {
	n := 1 + len(training)
	if cap(s.ctx) < n {
		s.ctx = make([]tsContext, n)
	}
	s.ctx = s.ctx[:n]
	s.ready = growFloats(s.ready, n)
	s.ctx[0].load(inference)
	for i, ops := range training {
		s.ctx[i+1].load(ops)
	}
	for i := range s.ctx {
		c := &s.ctx[i]
		var busy float64
		for _, d := range c.dur {
			busy += d
		}
		if len(c.dur) == 0 || busy <= 0 {
			return nil, fmt.Errorf("context %d: %w", i, errEmptyUnit)
		}
		c.rem = c.dur[0]
		s.ready[i] = c.gap[0]
	}
	nreq := len(arrivals)
	r := &s.res
	r.latency = growFloats(r.latency, nreq)
	r.service = growFloats(r.service, nreq)
	r.progress = growFloats(r.progress, len(training))
	r.events = 0
	if nreq == 0 {
		r.endUS = 0
		return r, nil
	}

	inf0 := &s.ctx[0]
	req := 0
	reqStart := arrivals[0]
	s.ready[0] = reqStart + inf0.gap[0]

	now := 0.0
	owner := 0
	sliceStart := 0.0
	idleSince := 0.0
	for req < nreq {
		// One tenure of the owner. The other contexts do not run while it
		// holds the GPU, so the time the first of them has work is fixed
		// for the whole tenure, and so is the slice boundary at which the
		// owner must give way.
		o := owner
		other := inf
		for c, t := range s.ready {
			if c != o && t < other {
				other = t
			}
		}
		preempt := inf
		if other < inf {
			k := math.Ceil((max(other, now)-sliceStart)/p.SliceUS - 1e-9)
			preempt = sliceStart + max(k, 1)*p.SliceUS
		}
		c := &s.ctx[o]
		for req < nreq {
			if s.ready[o] > now {
				// Idle in a host gap or between requests: the owner keeps
				// the GPU for the hold-over (or until the slice boundary).
				yieldAt := min(max(other, idleSince+p.HoldoverUS), preempt)
				if s.ready[o] > yieldAt {
					now = max(now, yieldAt)
					break
				}
				now = s.ready[o]
			}
			end := now + c.rem
			if end > preempt {
				c.rem -= preempt - now
				now = preempt
				r.events++ // preemption
				break
			}
			now = end
			r.events++
			req = s.complete(o, now, req, &reqStart, arrivals)
			idleSince = now
		}
		if req >= nreq {
			break
		}
		// Switch to the next context with ready work, round robin.
		owner = s.nextReady(o, now)
		now += p.SwitchUS
		sliceStart = now
		r.events++
	}
	r.endUS = now
	for i := range training {
		c := &s.ctx[i+1]
		done := c.cum[c.idx]
		if s.ready[i+1] <= now { // current op started or ready: its gap is done
			done += c.gap[c.idx] + c.dur[c.idx] - c.rem
		}
		r.progress[i] = float64(c.iters) + done/c.cycle
	}
	return r, nil
}

// complete finishes context o's current kernel at now: the next op becomes
// ready after its gap; the last op of a request records its latency and
// starts the next request, the last op of an iteration starts the next.
func (s *TimesliceSim) complete(o int, now float64, req int, reqStart *float64, arrivals []float64) int {
	c := &s.ctx[o]
	if c.idx+1 < len(c.dur) {
		c.idx++
		c.rem = c.dur[c.idx]
		s.ready[o] = now + c.gap[c.idx]
		return req
	}
	c.idx = 0
	c.rem = c.dur[0]
	if o != 0 {
		c.iters++
		s.ready[o] = now + c.gap[0]
		return req
	}
	s.res.latency[req] = now - arrivals[req]
	s.res.service[req] = now - *reqStart
	req++
	if req < len(arrivals) {
		*reqStart = max(arrivals[req], now)
		s.ready[0] = *reqStart + c.gap[0]
	} else {
		s.ready[0] = inf
	}
	return req
}

// nextReady returns the first context after o, in round-robin order, whose
// work is ready at t.
func (s *TimesliceSim) nextReady(o int, t float64) int {
	n := len(s.ready)
	for i := 1; i < n; i++ {
		c := (o + i) % n
		if s.ready[c] <= t {
			return c
		}
	}
	return o
}
