package observe

import (
	"math"
	"time"
)

// MinRequestsForP99 is the fewest requests a window needs before its p99
// may correct a prediction: with fewer, a p99 is one or two requests' luck.
const MinRequestsForP99 = 100

// PlannedRate is the load the observation says to plan for: the windowed
// rate, or with forecast its forecast when that is higher, so that a rising
// load is planned for before it arrives; ok is false when the observation
// may not be decided on.
func (o Observation) PlannedRate(forecast bool) (float64, bool) {
	if !o.Usable() || math.IsNaN(o.RateRPS) {
		return 0, false
	}
	if f := o.ForecastRPS; forecast && f > o.RateRPS && !math.IsInf(f, 0) {
		return f, true
	}
	return o.RateRPS, true
}

// Span returns when the observation's window began and ended, as of now,
// and whether its latency figures may be judged: usable, with a p99, and
// at least MinRequestsForP99 requests.
func (o Observation) Span(now time.Time) (since, end time.Time, ok bool) {
	if !o.Usable() || math.IsNaN(o.P99MS) || o.Requests < MinRequestsForP99 {
		return time.Time{}, time.Time{}, false
	}
	end = now.Add(-o.Age)
	return end.Add(-o.Elapsed), end, true
}
