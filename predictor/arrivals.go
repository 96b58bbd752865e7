package predictor

import (
	"math/rand/v2"
)

// poissonArrivals fills dst with the arrival times (µs) of a Poisson process
// of rate rps, seeded so that the same seed gives the same arrivals. The
// first arrival is one inter-arrival time after 0.
func poissonArrivals(dst []float64, rps float64, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x636f6c6f6364)) // "colocd"
	meanUS := 1e6 / rps
	t := 0.0
	for i := range dst {
		t += r.ExpFloat64() * meanUS
		dst[i] = t
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
