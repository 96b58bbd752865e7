package observe

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// reading is a reading at t0+sec with a histogram over bounds 10, 20, 50 ms.
func reading(sec int, requests float64, counts ...float64) Reading {
	r := Reading{At: t0.Add(time.Duration(sec) * time.Second), Requests: requests}
	if counts != nil {
		r.Latency = &Histogram{Bounds: []float64{10, 20, 50, math.Inf(1)}, Counts: counts, Count: counts[len(counts)-1]}
		r.DurationCount = r.Latency.Count
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestWindowInterpolates: percentiles interpolate linearly inside the bucket
// that holds the rank, from bucket deltas (what the first reading had
// already counted does not count).
func TestWindowInterpolates(t *testing.T) {
	t.Parallel()
	w := Window{Span: time.Minute}
	w.Add(reading(0, 1000, 500, 500, 500, 500)) // before the window: only a base
	w.Add(reading(10, 1100, 550, 590, 599, 600))
	s, ok := w.Stats()
	if !ok {
		t.Fatal("no stats from two readings")
	}
	// Deltas: 50, 90, 99, 100 cumulative.
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"rate", s.RateRPS, 10}, {"p50", s.P50MS, 10}, {"p90", s.P90MS, 20}, {"p99", s.P99MS, 50}} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
		}
	}
	if s.P99AtLeast || s.P99LowMS != 20 || s.P99HighMS != 50 {
		t.Errorf("p99 in [%g, %g] (at least %v), want [20, 50], not flagged", s.P99LowMS, s.P99HighMS, s.P99AtLeast)
	}
}

// TestWindowCounterReset: a counter that goes down is a restart: the
// reading after it counts from zero, and the rate never goes negative.
func TestWindowCounterReset(t *testing.T) {
	t.Parallel()
	w := Window{Span: time.Minute}
	w.Add(reading(0, 100, 10, 20, 30, 40))
	w.Add(reading(5, 150, 20, 40, 60, 80))
	w.Add(reading(10, 20, 5, 10, 15, 20)) // restarted: 20 since
	s, _ := w.Stats()
	if s.Requests != 70 || !near(s.RateRPS, 7) {
		t.Errorf("requests %g, rate %g; want 70, 7", s.Requests, s.RateRPS)
	}
	// Buckets: 10,20,30,40 from the first delta plus 5,10,15,20 since the
	// restart make 15,30,45,60: rank 30 is the top of the 20 ms bucket.
	if !near(s.P50MS, 20) {
		t.Errorf("p50 = %g, want 20", s.P50MS)
	}
}

// TestWindowSpan: readings older than the span go, but for the newest of
// them, which stays as the base of the first delta.
func TestWindowSpan(t *testing.T) {
	t.Parallel()
	w := Window{Span: 10 * time.Second}
	for sec := 0; sec <= 30; sec += 5 {
		w.Add(reading(sec, float64(sec*10)))
	}
	if w.Len() != 3 { // 20 (base), 25, 30
		t.Fatalf("%d readings, want 3", w.Len())
	}
	s, _ := w.Stats()
	if s.Elapsed != 10*time.Second || !near(s.RateRPS, 10) {
		t.Errorf("elapsed %s, rate %g; want 10s, 10", s.Elapsed, s.RateRPS)
	}
	w.Add(reading(25, 0)) // out of order: dropped
	if w.Len() != 3 {
		t.Errorf("an older reading was kept")
	}
}

// StatsSince counts from the first reading at or after since: what the
// server did after a change, however long ago within the span.
func TestWindowStatsSince(t *testing.T) {
	t.Parallel()
	w := Window{Span: 10 * time.Minute}
	for sec := 0; sec <= 300; sec += 5 { // 2 req/s, then 10 req/s from 120 s
		n := float64(2 * min(sec, 120))
		if sec > 120 {
			n += float64(10 * (sec - 120))
		}
		w.Add(reading(sec, n))
	}
	for _, c := range []struct {
		since   int
		elapsed time.Duration
		rate    float64
	}{
		{-60, 300 * time.Second, (240 + 1800) / 300.0}, // before the first reading: all of it
		{120, 180 * time.Second, 10},
		{121, 175 * time.Second, 10}, // the next reading at or after
		{300, 0, 0},                  // one reading: no figures
	} {
		s, ok := w.StatsSince(t0.Add(time.Duration(c.since) * time.Second))
		if c.elapsed == 0 {
			if ok {
				t.Errorf("since %d s: figures %+v from one reading", c.since, s)
			}
			continue
		}
		if !ok || s.Elapsed != c.elapsed || !near(s.RateRPS, c.rate) {
			t.Errorf("since %d s: ok %v, elapsed %s, rate %g; want %s, %g", c.since, ok, s.Elapsed, s.RateRPS, c.elapsed, c.rate)
		}
	}
}

// ExcessSD is the rate's spread beyond Poisson arrivals' at its mean: none
// for a steady count, the bursts' for a bursty one.
func TestWindowExcessSD(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		steps []float64 // requests each 5 s
		want  float64   // req/s
	}{
		{"steady at 10 req/s (below Poisson's own spread)", []float64{50, 50, 50, 50, 50, 50}, 0},
		{"bursts of 100 in every other interval", []float64{100, 0, 100, 0, 100, 0}, math.Sqrt(100 - 10.0/5)},
		{"two readings", []float64{50}, 0},
	} {
		w := Window{Span: time.Hour}
		n := 0.0
		w.Add(reading(0, 0))
		for i, d := range c.steps {
			n += d
			w.Add(reading(5*(i+1), n))
		}
		if got := w.ExcessSD(); !near(got, c.want) {
			t.Errorf("%s: ExcessSD = %g, want %g", c.name, got, c.want)
		}
	}
}

// TestWindowTailBucket: a p99 in the +Inf bucket is the last finite bound,
// flagged as a lower bound.
func TestWindowTailBucket(t *testing.T) {
	t.Parallel()
	w := Window{Span: time.Minute}
	w.Add(reading(0, 0, 0, 0, 0, 0))
	w.Add(reading(10, 100, 10, 20, 90, 100))
	s, _ := w.Stats()
	if s.P99MS != 50 || !s.P99AtLeast || !math.IsInf(s.P99HighMS, 1) {
		t.Errorf("p99 %g (at least %v), want 50, true", s.P99MS, s.P99AtLeast)
	}
}

// TestWindowSummaryAndMean: without a histogram, the mean comes from the
// duration counters and the percentiles from the server's summary.
func TestWindowSummaryAndMean(t *testing.T) {
	t.Parallel()
	w := Window{Span: time.Minute}
	w.Add(Reading{At: t0, Requests: 100, DurationSumMS: 1000, DurationCount: 100})
	w.Add(Reading{At: t0.Add(10 * time.Second), Requests: 200, DurationSumMS: 3000, DurationCount: 200,
		Quantiles: map[float64]float64{0.5: 12, 0.99: 80}})
	s, _ := w.Stats()
	if !near(s.MeanMS, 20) || s.P99MS != 80 || s.P50MS != 12 || !math.IsNaN(s.P90MS) {
		t.Errorf("mean %g, p50 %g, p90 %g, p99 %g; want 20, 12, NaN, 80", s.MeanMS, s.P50MS, s.P90MS, s.P99MS)
	}
}

func TestWindowNeedsTwoReadings(t *testing.T) {
	t.Parallel()
	var w Window
	w.Span = time.Minute
	if _, ok := w.Stats(); ok {
		t.Error("stats from no reading")
	}
	w.Add(reading(0, 1, 1, 1, 1, 1))
	if s, ok := w.Stats(); ok || !math.IsNaN(s.P99MS) {
		t.Errorf("stats from one reading: %+v", s)
	}
}

// The sure p99 is below the p99 by what the window's few requests leave
// open, and closes on it as they grow.
func TestP99SureFollowsTheRequestCount(t *testing.T) {
	t.Parallel()
	at := time.Unix(1000, 0)
	bounds := []float64{10, 20, 30, 40, 50, 100, math.Inf(1)}
	for _, n := range []float64{100, 10000} {
		w := Window{Span: time.Hour}
		w.Add(Reading{At: at, Latency: &Histogram{Bounds: bounds, Counts: make([]float64, len(bounds))}})
		// A latency uniform over 0 to 50 ms: 20 % a bucket.
		counts := []float64{0.2 * n, 0.4 * n, 0.6 * n, 0.8 * n, n, n, n}
		w.Add(Reading{At: at.Add(time.Minute), Requests: n, Latency: &Histogram{Bounds: bounds, Counts: counts}})
		s, ok := w.Stats()
		if !ok {
			t.Fatal("no stats")
		}
		want := 50 * sureQuantile(n)
		if math.Abs(s.P99SureMS-want) > 1e-9 || !(s.P99SureMS < s.P99MS) {
			t.Errorf("n %g: sure p99 %.3f, want %.3f below the p99 %.3f", n, s.P99SureMS, want, s.P99MS)
		}
	}
	if q := sureQuantile(100); math.Abs(q-(0.99-1.645*math.Sqrt(0.0099/100))) > 1e-12 || sureQuantile(1e6) < 0.989 {
		t.Errorf("sure quantiles %v, %v", sureQuantile(100), sureQuantile(1e6))
	}
}
