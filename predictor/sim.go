package predictor

import (
	"errors"
	"fmt"
	"math"
)

var inf = math.Inf(1)

// errEmptyUnit is returned when a workload has no GPU time at all.
var errEmptyUnit = errors.New("workload has no GPU time")

// MaxEvents bounds one simulation: a scenario whose requests are so sparse
// that the trainers run billions of kernels between them would otherwise
// take minutes. 200 M events is about two seconds.
const MaxEvents = 200_000_000

// ErrCanceled is returned when a simulation's Scenario.Done closed before
// it ended: its deadline passed.
var ErrCanceled = errors.New("simulation canceled: its deadline passed")

// cancelCheck is how often, in events, a simulation looks whether it was
// canceled: a few microseconds of work between looks.
const cancelCheck = 1 << 14

// ErrTooManyEvents is returned when a simulation exceeds MaxEvents.
var ErrTooManyEvents = errors.New("simulation exceeds 200 million events: the request rate is too low for the number of requests (use fewer requests or a higher rate)")

// simContext is one GPU context of a simulation: an inference server (the
// first contexts, one per service) or a training job. Ops are stored as parallel slices so the
// inner loops touch only what they need.
type simContext struct {
	dur, gap []float64
	cum      []float64 // cum[i]: solo time from the unit's start to op i's gap start
	cycle    float64   // solo length of one unit (request or iteration), µs
	idx      int       // current op
	rem      float64   // remaining work of the current op, in solo µs
	iters    int       // completed training iterations
}

// MinUnitUS is the shortest unit (request or iteration) the simulation
// accepts: a unit shorter than float precision at the simulated time would
// stop the clock.
const MinUnitUS = 1.0

func (c *simContext) load(ops []Op) error {
	n := len(ops)
	c.dur = growFloats(c.dur, n)
	c.gap = growFloats(c.gap, n)
	c.cum = growFloats(c.cum, n)
	t, busy := 0.0, 0.0
	for i, op := range ops {
		c.dur[i], c.gap[i], c.cum[i] = op.DurUS, op.GapUS, t
		t += op.GapUS + op.DurUS
		busy += op.DurUS
	}
	if n == 0 || busy <= 0 {
		return errEmptyUnit
	}
	if t < MinUnitUS {
		return fmt.Errorf("unit lasts %g µs: want at least %g µs", t, MinUnitUS)
	}
	c.cycle = t
	c.idx, c.iters = 0, 0
	c.rem = c.dur[0]
	return nil
}

func growFloats(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float64, n)
}

// simResult is what one simulation run measured, in µs.
type simResult struct {
	latency, service []float64   // per request of the first service: svc[0]'s
	svc              []svcResult // per service
	endUS            float64     // completion of the last request
	progress         []float64   // training iterations done per training context (fractional)
	events           int         // kernel events processed
}

// svcResult is one service's per-request latency and service time.
type svcResult struct {
	latency, service []float64
}

// svcState is one inference service's FIFO of requests during a run.
type svcState struct {
	arrivals []float64
	req      int     // the request in service (or next to start)
	reqStart float64 // when it started: max(arrival, previous completion)
}

// simState is what both sharing models keep: the contexts, when each one's
// current op is ready, each inference service's FIFO of requests, and the
// result. It is reused between runs so that a run allocates nothing once
// the buffers have grown.
type simState struct {
	ctx     []simContext
	ready   []float64 // ready[c]: when context c's current op can start (inf: never)
	nsvc    int       // contexts 0..nsvc-1 serve requests; the others loop
	svc     []svcState
	pending int // services with requests left
	res     simResult
	// stop, when closed, ends the run at its next check (Scenario.Done);
	// canceled says it did.
	stop     <-chan struct{}
	canceled bool
}

// reset loads the workloads (the first contexts serve arrivals, one per
// service; the trainers loop) and clears the result.
func (s *simState) reset(services [][]Op, training [][]Op, arrivals [][]float64) error {
	k := len(services)
	n := k + len(training)
	if cap(s.ctx) < n {
		s.ctx = make([]simContext, n)
	}
	s.ctx = s.ctx[:n]
	s.ready = growFloats(s.ready, n)
	s.nsvc = k
	for j, ops := range services {
		if err := s.ctx[j].load(ops); err != nil {
			if j == 0 {
				return fmt.Errorf("inference: %w", err)
			}
			return fmt.Errorf("inference[%d]: %w", j, err)
		}
	}
	for i, ops := range training {
		if err := s.ctx[k+i].load(ops); err != nil {
			return fmt.Errorf("training[%d]: %w", i, err)
		}
		s.ready[k+i] = s.ctx[k+i].gap[0]
	}
	r := &s.res
	if cap(s.svc) < k {
		s.svc = make([]svcState, k)
	}
	s.svc = s.svc[:k]
	if cap(r.svc) < k {
		r.svc = append(r.svc[:cap(r.svc)], make([]svcResult, k-cap(r.svc))...)
	}
	r.svc = r.svc[:k]
	s.pending = 0
	for j := range k {
		sv, rs := &s.svc[j], &r.svc[j]
		nreq := len(arrivals[j])
		rs.latency = growFloats(rs.latency, nreq)
		rs.service = growFloats(rs.service, nreq)
		*sv = svcState{arrivals: arrivals[j]}
		if nreq == 0 {
			s.ready[j] = inf
			continue
		}
		s.pending++
		sv.reqStart = sv.arrivals[0]
		s.ready[j] = sv.reqStart + s.ctx[j].gap[0]
	}
	r.latency, r.service = r.svc[0].latency, r.svc[0].service
	r.progress = growFloats(r.progress, len(training))
	r.events, r.endUS = 0, 0
	s.canceled = false
	return nil
}

// done reports whether every request has completed, or the event budget
// is spent (run then reports ErrTooManyEvents).
func (s *simState) done() bool { return s.doneAt(s.res.events) }

// doneAt is done for a loop that counts its events in a local: events
// stands for s.res.events.
func (s *simState) doneAt(events int) bool {
	if s.pending == 0 || events > maxEvents {
		return true
	}
	if s.stop != nil && events%cancelCheck == 0 {
		select {
		case <-s.stop:
			s.canceled = true
			return true
		default:
		}
	}
	return false
}

// maxEvents is MaxEvents; tests lower it.
var maxEvents = MaxEvents

// result finishes the run, or reports that it ran out of events.
func (s *simState) result(now float64) (*simResult, error) {
	if s.canceled {
		return nil, ErrCanceled
	}
	if s.res.events > maxEvents {
		return nil, ErrTooManyEvents
	}
	return s.finish(now), nil
}

// complete finishes context o's current kernel at now: the next op becomes
// ready after its gap; the last op of a request records its latency and
// starts the next request, the last op of an iteration starts the next.
// Each completion counts as one event.
func (s *simState) complete(o int, now float64) {
	c := &s.ctx[o]
	s.res.events++
	if c.idx+1 < len(c.dur) { // the common case, small enough to inline in callers
		c.idx++
		c.rem = c.dur[c.idx]
		s.ready[o] = now + c.gap[c.idx]
		return
	}
	s.completeUnit(o, now)
}

// completeUnit finishes the last op of a request or an iteration.
func (s *simState) completeUnit(o int, now float64) {
	c := &s.ctx[o]
	c.idx = 0
	c.rem = c.dur[0]
	if o >= s.nsvc {
		c.iters++
		s.ready[o] = now + c.gap[0]
		return
	}
	sv, rs := &s.svc[o], &s.res.svc[o]
	rs.latency[sv.req] = now - sv.arrivals[sv.req]
	rs.service[sv.req] = now - sv.reqStart
	sv.req++
	if sv.req < len(sv.arrivals) {
		sv.reqStart = max(sv.arrivals[sv.req], now)
		s.ready[o] = sv.reqStart + c.gap[0]
	} else {
		s.ready[o] = inf
		s.pending--
	}
}

// finish records the end time and each trainer's fractional progress.
func (s *simState) finish(now float64) *simResult {
	s.res.endUS = now
	for i := range s.res.progress {
		c := &s.ctx[s.nsvc+i]
		done := c.cum[c.idx]
		if r := s.ready[s.nsvc+i]; r <= now { // the current op's gap is over; part of it may have run
			done += c.gap[c.idx] + c.dur[c.idx] - c.rem
		} else { // still in the gap: the part of it already elapsed counts
			done += max(0, c.gap[c.idx]-(r-now))
		}
		s.res.progress[i] = float64(c.iters) + done/c.cycle
	}
	return &s.res
}

// EventEstimate is about how much work a prediction of sc under mode
// simulates, in kernel events, found without simulating: every service's
// requests' ops, and the trainers' ops. Time-slicing steps every trainer
// kernel over the time the requests span, at the trainer's solo speed (it
// runs no faster co-located); MPS steps them one by one only while a
// request is in flight (taken as busyFactor times its solo time), and skips
// whole iterations while a trainer runs alone. On real profiles it is
// within a factor of a few of the events simulated; a profile of
// sub-microsecond kernels shows here as billions. It is 0 for a scenario
// with no inference profile.
func (sc *Scenario) EventEstimate(mode Mode) float64 {
	if sc.Inference == nil {
		return 0
	}
	n, horizonUS, events, busyUS := float64(sc.requests()), sc.horizonS()*1e6, 0.0, 0.0
	for _, p := range sc.services() {
		if p != nil {
			ops := sc.ops(p)
			events += n * float64(len(ops))
			busyUS += n * unitUS(ops) * busyFactor
		}
	}
	for _, t := range sc.Training {
		if t == nil {
			continue
		}
		ops := sc.ops(t)
		unit := max(unitUS(ops), MinUnitUS)
		perUS := float64(len(ops)) / unit
		switch mode {
		case ModeMPS:
			events += min(busyUS, horizonUS)*perUS + horizonUS/unit
		default:
			events += horizonUS * perUS
		}
	}
	return events
}

// busyFactor is how much longer than solo EventEstimate takes a request to
// be in flight co-located.
const busyFactor = 4

// requests is the number of requests simulated per service.
func (sc *Scenario) requests() int {
	if sc.Requests <= 0 {
		return DefaultRequests
	}
	return sc.Requests
}

// horizonS is about how long the simulated requests span, in seconds: the
// sparsest service's requests at its rate (a load is a rate of the
// service's solo unit).
func (sc *Scenario) horizonS() float64 {
	n, out := float64(sc.requests()), 0.0
	span := func(p *Profile, rate, load float64) {
		if p == nil {
			return
		}
		if rate <= 0 && load > 0 {
			if u := unitUS(sc.ops(p)); u > 0 {
				rate = load / u * 1e6
			}
		}
		if rate > 0 {
			out = max(out, n/rate)
		}
	}
	span(sc.Inference, sc.RateRPS, sc.Load)
	for _, o := range sc.Others {
		span(o.Profile, o.RateRPS, o.Load)
	}
	return out
}

// unitUS is the solo length of a unit of ops (a request or an iteration):
// its gaps and kernels.
func unitUS(ops []Op) float64 {
	u := 0.0
	for _, op := range ops {
		u += op.GapUS + op.DurUS
	}
	return u
}

// checkBudget refuses a scenario whose EventEstimate is above its
// MaxEvents, before any simulation.
func (sc *Scenario) checkBudget(mode Mode) error {
	budget := sc.MaxEvents
	if budget <= 0 {
		budget = MaxEvents
	}
	if est := sc.EventEstimate(mode); est > budget {
		return fmt.Errorf("%w: about %.3g events estimated before simulating, over the budget of %.3g (%s: the trainers' kernels a microsecond over the %.3g s the requests span)",
			ErrTooManyEvents, est, budget, mode, sc.horizonS())
	}
	return nil
}
