package simserver

import (
	"io"
	"math/rand/v2"
	"time"

	"github.com/colocd/colocd/simserver/llm"
)

// MaxArrivals bounds the arrivals Poisson draws.
const MaxArrivals = llm.MaxTraceRequests

// ParseArrivals reads a trace (llm.ParseTrace's formats: the Azure LLM
// inference CSV, or one arrival a line) and returns each request's arrival
// as an offset from the first, in order.
func ParseArrivals(r io.Reader) ([]time.Duration, error) {
	reqs, err := llm.ParseTrace(r)
	if err != nil {
		return nil, err
	}
	out := make([]time.Duration, len(reqs))
	for i, q := range reqs {
		out[i] = q.Arrival
	}
	return out, nil
}

// Compress divides every offset by factor (> 0): a trace replayed factor
// times faster, at factor times its rate.
func Compress(arrivals []time.Duration, factor float64) []time.Duration {
	out := make([]time.Duration, len(arrivals))
	for i, a := range arrivals {
		out[i] = time.Duration(float64(a) / factor)
	}
	return out
}

// Poisson returns the arrivals of a Poisson process at rate requests a
// second over d, from a seeded generator.
func Poisson(rate float64, d time.Duration, seed uint64) []time.Duration {
	if !(rate > 0) || d <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []time.Duration
	for t := 0.0; ; {
		t += rng.ExpFloat64() / rate
		if t >= d.Seconds() || len(out) == MaxArrivals {
			return out
		}
		out = append(out, time.Duration(t*float64(time.Second)))
	}
}

// RatePerMinute counts the arrivals of each minute, as requests a second.
func RatePerMinute(arrivals []time.Duration) []float64 {
	if len(arrivals) == 0 {
		return nil
	}
	n := int(arrivals[len(arrivals)-1]/time.Minute) + 1
	out := make([]float64, n)
	for _, a := range arrivals {
		out[int(a/time.Minute)]++
	}
	for i := range out {
		out[i] /= 60
	}
	return out
}
