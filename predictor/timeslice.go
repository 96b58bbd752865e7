package predictor

import (
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
	if !(p.SliceUS >= 1 && p.SliceUS <= 1e6) {
		c.add("timeslice.slice_us", "a slice in [1, 1e6] µs", fmtFloat(p.SliceUS))
	}
	if !(p.SwitchUS >= 0 && p.SwitchUS <= 1e5) {
		c.add("timeslice.switch_us", "a switch cost in [0, 1e5] µs", fmtFloat(p.SwitchUS))
	}
	if !(p.HoldoverUS >= 0 && p.HoldoverUS <= 1e6) {
		c.add("timeslice.holdover_us", "a hold-over in [0, 1e6] µs", fmtFloat(p.HoldoverUS))
	}
	return c.err("time-slicing parameters")
}

// timesliceSim runs the time-slicing simulation. It keeps its buffers between
// runs, so a caller that predicts many times (calibration, the admission
// search) allocates nothing per run after the first. Not safe for concurrent use.
type timesliceSim struct {
	simState
}

// run simulates the inference services (the first contexts, service j
// serving arrivals[j]) while each training workload loops, all sharing the
// GPU by round-robin time slicing.
//
// Scheduling rules (docs/predictor.md): the owner runs until its slice ends
// and another context has ready work; slices renew back to back while nobody
// waits, so a newcomer waits for the rest of the current slice. An owner with
// no ready work keeps the GPU for the hold-over, then yields to the next
// ready context in round-robin order (or at its slice boundary if sooner).
// Each switch costs SwitchUS with nothing running; kernels are preempted at
// slice end and resume where they stopped.
func (s *timesliceSim) run(services [][]Op, training [][]Op, arrivals [][]float64, p TimesliceParams) (*simResult, error) {
	if err := s.reset(services, training, arrivals); err != nil {
		return nil, err
	}
	// At the start no context holds the GPU: the first to have work takes
	// it, with no switch and no hold-over in anyone's favour.
	now := 0.0
	owner := 0
	for c, r := range s.ready {
		if r < s.ready[owner] {
			owner = c
		}
	}
	now = s.ready[owner]
	sliceStart := now
	idleSince := now
	for !s.done() {
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
			// The first slice boundary at or after the moment someone
			// waits. The tolerance keeps a boundary that rounding puts a
			// hair after that moment from costing a whole slice; the
			// clamp keeps one it puts a hair before from lying in the
			// past, where an idle owner would yield to nobody, forever.
			waitFrom := max(other, now)
			k := math.Ceil((waitFrom-sliceStart)/p.SliceUS - 1e-9)
			preempt = max(sliceStart+max(k, 1)*p.SliceUS, waitFrom)
		}
		c := &s.ctx[o]
		for !s.done() {
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
				s.res.events++ // preemption
				break
			}
			now = end
			s.complete(o, now)
			idleSince = now
		}
		if s.done() {
			break
		}
		// Switch to the next context with ready work, round robin. A
		// tenure ends at or after the time another context is ready, so
		// there always is one; the owner goes on only if rounding says not.
		if owner = s.nextReady(o, now); owner == o {
			s.res.events++ // bounded by the event budget, even then
			continue
		}
		now += p.SwitchUS
		sliceStart = now
		s.res.events++
	}
	return s.result(now)
}

// nextReady returns the first context after o, in round-robin order, whose
// work is ready at t.
func (s *timesliceSim) nextReady(o int, t float64) int {
	n := len(s.ready)
	for i := 1; i < n; i++ {
		c := (o + i) % n
		if s.ready[c] <= t {
			return c
		}
	}
	return o
}
