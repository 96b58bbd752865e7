package predictor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// arrivalProcess draws one service's arrival times (µs): a Poisson process
// of rate rps, or, for an engine (burst > 1), Poisson bursts of steps: each
// burst queues a geometric number of steps (mean burst) at one instant, and
// bursts come at rate rps/burst, so that steps arrive at rps on average and
// the engine is busy rps × its solo step time of the time, in periods of
// back-to-back steps. Seeded, so that the same seed gives the same times.
type arrivalProcess struct {
	r      *rand.Rand
	meanUS float64 // mean time between arrivals (bursts for an engine)
	q      float64 // engine: 1 − 1/burst, the chance a burst has another step
	most   float64 // engine: the largest burst drawn (64 × the mean: e^−64 of the tail cut)
	t      float64
	left   int // steps of the current burst still to hand out
}

func newArrivalProcess(rps, burst float64, seed uint64) arrivalProcess {
	p := arrivalProcess{r: rand.New(rand.NewPCG(seed, 0x636f6c6f6364)), meanUS: 1e6 / rps} // "colocd"
	if burst > 1 {
		p.meanUS *= burst
		p.q = 1 - 1/burst
		p.most = 64 * burst
	}
	return p
}

// next returns the next arrival time. A request process draws one number
// per arrival, so it gives the times it always has.
func (p *arrivalProcess) next() float64 {
	if p.left > 0 {
		p.left--
		return p.t
	}
	p.t += p.r.ExpFloat64() * p.meanUS
	if p.q > 0 { // geometric size ≥ 1: P(k) = (1−q)·q^(k−1)
		p.left = int(math.Min(math.Floor(math.Log(1-p.r.Float64())/math.Log(p.q)), p.most))
	}
	return p.t
}

// poissonArrivals fills dst with the arrival times (µs) of newArrivalProcess
// (rps, burst, seed). The first arrival is one inter-arrival time after 0.
func poissonArrivals(dst []float64, rps, burst float64, seed uint64) {
	p := newArrivalProcess(rps, burst, seed)
	for i := range dst {
		dst[i] = p.next()
	}
}

// soloQueue runs the FIFO single-server queue with a deterministic service
// time serviceUS over arrivals (Lindley's recursion) and writes each request's
// latency (arrival → completion, µs) into lat.
func soloQueue(arrivals []float64, serviceUS float64, lat []float64) {
	free := 0.0
	for i, a := range arrivals {
		start := max(a, free)
		free = start + serviceUS
		lat[i] = free - a
	}
}

// serviceSeed is service j's arrival seed: the scenario's own for the first
// service, so that a scenario with one service predicts as it always has.
func serviceSeed(seed uint64, j int) uint64 { return seed + uint64(j)*0x9e3779b97f4a7c15 }

// arrivalsFor draws every service's arrivals (rates in req/s) over one
// horizon: n for each, then more for every service whose n-th arrival
// comes before the last service's, up to that time, so that each keeps
// arriving (and interfering) until the end. Each service's figures are
// over its first n requests, on the same arrivals it would have alone.
// With one service that is its n arrivals.
func arrivalsFor(dst [][]float64, rates, bursts []float64, n int, seed uint64) ([][]float64, error) {
	k := len(rates)
	if cap(dst) < k {
		dst = append(dst[:cap(dst)], make([][]float64, k-cap(dst))...)
	}
	dst = dst[:k]
	horizon := 0.0
	for j, r := range rates {
		dst[j] = growFloats(dst[j], n)
		poissonArrivals(dst[j], r, burstOf(bursts, j), serviceSeed(seed, j))
		horizon = max(horizon, dst[j][n-1])
	}
	if k == 1 {
		return dst, nil
	}
	// Bound the memory before drawing: services far apart in rate would
	// otherwise ask for the fast one's arrivals over the slow one's horizon.
	var total float64
	for _, r := range rates {
		total += max(float64(n), r*horizon/1e6)
	}
	if total > MaxArrivals {
		return dst, fmt.Errorf("%w: the services' rates are %.3g apart, and %d requests of the slowest take %.3g s, in which the others send %.3g requests (at most %d)",
			ErrTooManyEvents, slices.Max(rates)/slices.Min(rates), n, horizon/1e6, total, MaxArrivals)
	}
	// The bound above is on the expected count; bursts spread the drawn
	// one widely, so the drawing stops at the bound too.
	left := MaxArrivals
	for j, r := range rates {
		dst[j] = poissonUntil(dst[j][:0], r, burstOf(bursts, j), serviceSeed(seed, j), n, horizon, left)
		if left -= len(dst[j]); left < 0 {
			return dst, fmt.Errorf("%w: the services' bursts drew more than %d arrivals in %.3g s", ErrTooManyEvents, MaxArrivals, horizon/1e6)
		}
	}
	return dst, nil
}

// MaxArrivals bounds the arrivals of all services of one prediction
// (some 24 bytes each, with the per-request results).
const MaxArrivals = 5_000_000

// poissonUntil appends to dst the arrivals of poissonArrivals' process
// (same rate, burst and seed) until there are at least n and the next one
// would come after horizon, or until it has appended more than most.
func poissonUntil(dst []float64, rps, burst float64, seed uint64, n int, horizon float64, most int) []float64 {
	p := newArrivalProcess(rps, burst, seed)
	for {
		t := p.next()
		if len(dst) >= n && t > horizon || len(dst) > most {
			return dst
		}
		dst = append(dst, t)
	}
}

// burstOf is service j's mean burst (0: requests).
func burstOf(bursts []float64, j int) float64 {
	if j < len(bursts) {
		return bursts[j]
	}
	return 0
}
