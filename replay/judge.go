package replay

import (
	"maps"
	"math"
	"slices"
	"time"
)

// The latency histogram of a minute: buckets 1 % wide, from histMin ms.
const (
	histMin   = 0.01
	histRatio = 1.01
	histLen   = 2000 // up to 0.01 ms × 1.01²⁰⁰⁰, some 4·10⁶ ms
)

// minute is what one minute of the trace saw: the requests that arrived in
// it, and the latencies it is judged by (each request's, or each token's
// inter-token latency for an engine, too many to keep one by one).
type minute struct {
	arrived int
	exact   []float64
	hist    []uint32
	n       int
}

// tally keeps the minutes of a replay.
type tally map[int]*minute

func (t tally) at(at time.Time) *minute {
	k := int(at.Sub(start) / time.Minute)
	m := t[k]
	if m == nil {
		m = &minute{}
		t[k] = m
	}
	return m
}

// arrive counts a request arrived at at.
func (t tally) arrive(at time.Time) { t.at(at).arrived++ }

// latency records one latency of the minute of at, exactly.
func (t tally) latency(at time.Time, ms float64) {
	m := t.at(at)
	m.exact = append(m.exact, ms)
	m.n++
}

// token records one token's latency of the minute of at, to 1 %.
func (t tally) token(at time.Time, ms float64) {
	m := t.at(at)
	if m.hist == nil {
		m.hist = make([]uint32, histLen)
	}
	k := 0
	if ms > histMin {
		k = min(histLen-1, int(math.Ceil(math.Log(ms/histMin)/math.Log(histRatio))))
	}
	m.hist[k]++
	m.n++
}

// p99 is the minute's nearest-rank 99th percentile: exact, or the upper
// bound of its histogram bucket (at most 1 % above the true one).
func (m *minute) p99() float64 {
	rank := int(math.Ceil(0.99 * float64(m.n)))
	if m.hist == nil {
		slices.Sort(m.exact)
		return m.exact[rank-1]
	}
	seen := 0
	for k, c := range m.hist {
		if seen += int(c); seen >= rank {
			return histMin * math.Pow(histRatio, float64(k))
		}
	}
	return math.Inf(1)
}

// judge returns each minute in which at least minRequests requests arrived
// and some latency was recorded, in order, with its p99.
func (t tally) judge(minRequests int) []MinuteStat {
	var out []MinuteStat
	for _, k := range slices.Sorted(maps.Keys(t)) {
		m := t[k]
		if m.arrived < minRequests || m.n == 0 {
			continue
		}
		out = append(out, MinuteStat{Minute: k, Requests: m.arrived, P99MS: m.p99()})
	}
	return out
}
