package observe

import (
	"math"
	"slices"
	"time"
)

// Window keeps the readings of the last Span and computes what the server
// did over them: the request rate, and latency percentiles from the
// histogram's bucket deltas. A counter that goes down is a server restart:
// the reading after it counts from zero, never as a negative delta.
type Window struct {
	Span     time.Duration
	readings []Reading
}

// Add appends r (readings arrive in time order; an older one is dropped)
// and forgets readings that fall out of the span, keeping the newest one
// before it as the base of the first delta.
func (w *Window) Add(r Reading) {
	if n := len(w.readings); n > 0 && !r.At.After(w.readings[n-1].At) {
		return
	}
	w.readings = append(w.readings, r)
	cut := r.At.Add(-w.Span)
	i := 0
	for i+1 < len(w.readings) && !w.readings[i+1].At.After(cut) {
		i++
	}
	w.readings = slices.Delete(w.readings, 0, i)
}

// Len is the number of readings held.
func (w *Window) Len() int { return len(w.readings) }

// Last is the newest reading, if any.
func (w *Window) Last() (Reading, bool) {
	if len(w.readings) == 0 {
		return Reading{}, false
	}
	return w.readings[len(w.readings)-1], true
}

// Stats is what a window says about the server.
type Stats struct {
	// Elapsed is the time the window covers (first to last reading).
	Elapsed time.Duration
	// Requests completed in the window, and their rate.
	Requests float64
	RateRPS  float64
	// MeanMS is the mean latency (NaN without a completed request or a sum).
	MeanMS float64
	// P50MS, P90MS, P99MS are interpolated from the histogram's bucket
	// deltas, or taken from the server's summary; NaN when unknown.
	P50MS, P90MS, P99MS float64
	// P99AtLeast: the p99 fell in the +Inf bucket, so P99MS is only the
	// last finite bound, a lower bound of the truth.
	P99AtLeast bool
	// P99LowMS and P99HighMS bound the bucket the p99 fell in: the true
	// p99 lies between them, whatever the interpolation says (NaN from a
	// summary, and High is +Inf in the last bucket).
	P99LowMS, P99HighMS float64
	// P99SureMS is a p99 the server's latency is above with 95 %
	// confidence, given how few requests the window holds: the
	// (0.99 − 1.645·√(0.99·0.01/n)) quantile of its n requests (one-sided
	// binomial bound on the order statistic), interpolated as P99MS. It
	// is what a prediction is judged by: a p99 of a few hundred requests
	// is some requests' luck. NaN from a summary.
	P99SureMS float64
}

// sureQuantile is the quantile below the 0.99 that n requests put the
// true p99 above with 95 % confidence.
func sureQuantile(n float64) float64 {
	if n < 1 {
		return 0
	}
	return max(0, 0.99-1.645*math.Sqrt(0.99*0.01/n))
}

// Stats computes the window's figures; ok is false with fewer than two
// readings.
func (w *Window) Stats() (s Stats, ok bool) { return stats(w.readings) }

// StatsSince computes the figures of the window's readings at or after
// since (the first of them the base of the first delta): what the server
// did from since on, as far back as the window holds.
func (w *Window) StatsSince(since time.Time) (Stats, bool) {
	i, _ := slices.BinarySearchFunc(w.readings, since, func(r Reading, t time.Time) int { return r.At.Compare(t) })
	return stats(w.readings[i:])
}

// stats computes the figures of readings, in time order.
func stats(readings []Reading) (s Stats, ok bool) {
	nan := math.NaN()
	s = Stats{MeanMS: nan, P50MS: nan, P90MS: nan, P99MS: nan, P99LowMS: nan, P99HighMS: nan, P99SureMS: nan}
	if len(readings) < 2 {
		return s, false
	}
	first, last := readings[0], readings[len(readings)-1]
	s.Elapsed = last.At.Sub(first.At)
	var sum, count float64
	var buckets []float64
	for i := 1; i < len(readings); i++ {
		prev, cur := readings[i-1], readings[i]
		s.Requests += delta(prev.Requests, cur.Requests)
		d := delta(prev.DurationCount, cur.DurationCount)
		if d > 0 {
			sum += delta(prev.DurationSumMS, cur.DurationSumMS)
			count += d
		}
		buckets = addBucketDeltas(buckets, prev.Latency, cur.Latency)
	}
	s.RateRPS = s.Requests / s.Elapsed.Seconds()
	if count > 0 {
		s.MeanMS = sum / count
	}
	if buckets != nil && buckets[len(buckets)-1] > 0 {
		bounds := last.Latency.Bounds
		s.P50MS, _, _ = quantile(0.5, bounds, buckets)
		s.P90MS, _, _ = quantile(0.9, bounds, buckets)
		var i int
		s.P99MS, i, s.P99AtLeast = quantile(0.99, bounds, buckets)
		s.P99HighMS = bounds[i]
		if s.P99LowMS = 0; i > 0 {
			s.P99LowMS = bounds[i-1]
		}
		// The samples are at most as many independent ones as the units
		// counted: an engine's histogram counts tokens, a step's tokens
		// all take the step's time.
		n := buckets[len(buckets)-1]
		if s.Requests > 0 && s.Requests < n {
			n = s.Requests
		}
		s.P99SureMS, _, _ = quantile(sureQuantile(n), bounds, buckets)
	} else if q := last.Quantiles; q != nil {
		s.P50MS, s.P90MS, s.P99MS = orNaN(q, 0.5), orNaN(q, 0.9), orNaN(q, 0.99)
	}
	return s, true
}

// ExcessSD is the standard deviation of the window's per-interval request
// rates beyond what Poisson arrivals at their mean rate would give (in
// requests a second): √max(0, variance − mean/T̄), T̄ the mean interval in
// seconds. 0 with fewer than three readings.
func (w *Window) ExcessSD() float64 {
	n := len(w.readings) - 1
	if n < 2 {
		return 0
	}
	var sum, sum2, secs float64
	for i := 1; i <= n; i++ {
		prev, cur := w.readings[i-1], w.readings[i]
		dt := cur.At.Sub(prev.At).Seconds()
		r := delta(prev.Requests, cur.Requests) / dt
		sum += r
		sum2 += r * r
		secs += dt
	}
	mean := sum / float64(n)
	variance := sum2/float64(n) - mean*mean
	return math.Sqrt(max(0, variance-mean/(secs/float64(n))))
}

// delta is the counter's increase from prev to cur; a decrease means the
// server restarted, and cur is what it counted since.
func delta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// addBucketDeltas adds the per-bucket increase from prev to cur to acc.
// A restart (any bucket going down) counts cur from zero; a change of
// buckets (a new server version) starts acc over from cur's buckets.
func addBucketDeltas(acc []float64, prev, cur *Histogram) []float64 {
	if prev == nil || cur == nil {
		return acc
	}
	if !slices.Equal(prev.Bounds, cur.Bounds) {
		return nil
	}
	if acc == nil {
		acc = make([]float64, len(cur.Counts))
	}
	reset := cur.Count < prev.Count
	for i := range cur.Counts {
		if cur.Counts[i] < prev.Counts[i] {
			reset = true
		}
	}
	for i := range cur.Counts {
		if reset {
			acc[i] += cur.Counts[i]
		} else {
			acc[i] += cur.Counts[i] - prev.Counts[i]
		}
	}
	return acc
}

// quantile interpolates the q-quantile of cumulative bucket counts the way
// Prometheus' histogram_quantile does: find the bucket that holds the
// rank q·total and assume its requests spread evenly between its lower
// bound (0 for the first) and its upper bound. In the +Inf bucket the
// answer is the last finite bound, flagged as a lower bound. It also
// returns the bucket's index.
func quantile(q float64, bounds, cum []float64) (float64, int, bool) {
	total := cum[len(cum)-1]
	rank := q * total
	i, _ := slices.BinarySearchFunc(cum, rank, func(c, r float64) int {
		if c < r {
			return -1
		}
		return 1
	})
	if i >= len(cum) {
		i = len(cum) - 1
	}
	if math.IsInf(bounds[i], 1) {
		if i == 0 {
			return math.NaN(), i, true
		}
		return bounds[i-1], i, true
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = bounds[i-1], cum[i-1]
	}
	in := cum[i] - below
	if in <= 0 {
		return bounds[i], i, false
	}
	return lower + (bounds[i]-lower)*(rank-below)/in, i, false
}

func orNaN(m map[float64]float64, q float64) float64 {
	if v, ok := m[q]; ok {
		return v
	}
	return math.NaN()
}
