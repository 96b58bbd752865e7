package observe

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Reading is what one scrape found: cumulative figures, as the server keeps
// them since it started.
type Reading struct {
	At time.Time
	// Requests is the counter of completed requests.
	Requests float64
	// Latency is the cumulative latency histogram in milliseconds; nil when
	// the server exports none (Triton without histograms).
	Latency *Histogram
	// DurationSumMS and DurationCount are the cumulative latency sum and
	// count, for a mean where there is no histogram (Triton's counters).
	DurationSumMS, DurationCount float64
	// Quantiles are a summary's quantiles in ms, by quantile (0.99), as the
	// server computed them over its own recent window; nil when none.
	Quantiles map[float64]float64
}

// Histogram is a cumulative histogram: Counts[i] requests took at most
// Bounds[i] ms; the last bound is +Inf.
type Histogram struct {
	Bounds []float64
	Counts []float64
	SumMS  float64
	Count  float64
}

// ErrMissingSeries is wrapped when a scrape lacks a metric the preset
// reads, or has it only under other labels.
var ErrMissingSeries = errors.New("missing series")

// ErrBadValue is wrapped when a metric the preset reads is NaN, infinite
// (but for a +Inf bucket bound) or negative.
var ErrBadValue = errors.New("bad value")

// read extracts the preset's figures from parsed metric families.
func (p *Preset) read(fams map[string]*dto.MetricFamily, labels map[string]string, at time.Time) (Reading, error) {
	r := Reading{At: at}
	var err error
	if len(p.Labels) > 0 {
		labels = maps.Clone(labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, p.Labels)
	}
	absent := func(name string) bool { _, ok := fams[name]; return !ok && p.AbsentIsZero }
	switch {
	case absent(p.Requests):
	case p.CountOf:
		h, err := sumHistogram(fams, p.Requests, labels, 1)
		if errors.Is(err, ErrMissingSeries) && p.AbsentIsZero && len(p.Labels) > 0 && len(labels) == len(p.Labels) {
			// TGI creates a method's series on its first use: before
			// the first decode step there are only prefills (when the user
			// selects no labels of their own: those must match).
			return r, nil
		}
		if err != nil {
			return Reading{}, err
		}
		r.Requests = h.Count
	default:
		if r.Requests, err = sumCounter(fams, p.Requests, labels); err != nil {
			return Reading{}, err
		}
	}
	if p.Histogram != "" && !absent(p.Histogram) {
		if r.Latency, err = sumHistogram(fams, p.Histogram, labels, p.Unit); err != nil {
			return Reading{}, err
		}
		r.DurationSumMS, r.DurationCount = r.Latency.SumMS, r.Latency.Count
	}
	if p.DurationSum != "" {
		sum, err := sumCounter(fams, p.DurationSum, labels)
		if err != nil {
			return Reading{}, err
		}
		r.DurationSumMS, r.DurationCount = sum*p.Unit, r.Requests
	}
	if p.Summary != "" {
		if q, err := summaryQuantiles(fams, p.Summary, labels, p.Unit); err == nil {
			r.Quantiles = q
		} else if !errors.Is(err, ErrMissingSeries) { // a summary is optional
			return Reading{}, err
		}
	}
	return r, nil
}

// matching returns the family's metrics whose labels include every one of
// want.
func matching(fams map[string]*dto.MetricFamily, name string, want map[string]string, typ dto.MetricType) ([]*dto.Metric, error) {
	f, ok := fams[name]
	if !ok {
		return nil, fmt.Errorf("%w: no metric %s", ErrMissingSeries, name)
	}
	if f.GetType() != typ {
		return nil, fmt.Errorf("%w: %s is a %s, want a %s", ErrMissingSeries, name, f.GetType(), typ)
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		if hasLabels(m, want) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s has no series with labels %v", ErrMissingSeries, name, want)
	}
	return out, nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
			return false
		}
	}
	return true
}

func checkValue(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%w: %s is %g", ErrBadValue, name, v)
	}
	return nil
}

// sumCounter sums a counter over the series that match labels (a server
// splits completed requests by finish reason, say).
func sumCounter(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, error) {
	ms, err := matching(fams, name, labels, dto.MetricType_COUNTER)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range ms {
		v := m.GetCounter().GetValue()
		if err := checkValue(name, v); err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// sumHistogram adds the matching series of a histogram bucket by bucket;
// unit converts its values to ms.
func sumHistogram(fams map[string]*dto.MetricFamily, name string, labels map[string]string, unit float64) (*Histogram, error) {
	ms, err := matching(fams, name, labels, dto.MetricType_HISTOGRAM)
	if err != nil {
		return nil, err
	}
	var h *Histogram
	for _, m := range ms {
		one, err := histogramOf(name, m.GetHistogram(), unit)
		if err != nil {
			return nil, err
		}
		if h == nil {
			h = one
			continue
		}
		if !slices.Equal(h.Bounds, one.Bounds) {
			return nil, fmt.Errorf("%w: %s: series with different buckets", ErrBadValue, name)
		}
		for i := range h.Counts {
			h.Counts[i] += one.Counts[i]
		}
		h.SumMS += one.SumMS
		h.Count += one.Count
	}
	return h, nil
}

// histogramOf converts one series, with its +Inf bucket made explicit.
func histogramOf(name string, mh *dto.Histogram, unit float64) (*Histogram, error) {
	h := &Histogram{Count: float64(mh.GetSampleCount()) + mh.GetSampleCountFloat(), SumMS: mh.GetSampleSum() * unit}
	for _, b := range mh.GetBucket() {
		c := float64(b.GetCumulativeCount()) + b.GetCumulativeCountFloat()
		if err := checkValue(name+"_bucket", c); err != nil {
			return nil, err
		}
		if n := len(h.Counts); n > 0 && c < h.Counts[n-1] {
			return nil, fmt.Errorf("%w: %s: buckets are not cumulative", ErrBadValue, name)
		}
		h.Bounds = append(h.Bounds, b.GetUpperBound()*unit)
		h.Counts = append(h.Counts, c)
	}
	if err := checkValue(name+"_count", h.Count); err != nil {
		return nil, err
	}
	if err := checkValue(name+"_sum", h.SumMS); err != nil {
		return nil, err
	}
	if n := len(h.Bounds); n == 0 || !math.IsInf(h.Bounds[n-1], 1) {
		if n > 0 && h.Count < h.Counts[n-1] {
			return nil, fmt.Errorf("%w: %s: the count (%g) is below the last bucket's (%g), and there is no +Inf bucket", ErrBadValue, name, h.Count, h.Counts[n-1])
		}
		h.Bounds = append(h.Bounds, math.Inf(1))
		h.Counts = append(h.Counts, h.Count)
	}
	return h, nil
}

// summaryQuantiles reads a summary's quantiles; with several matching
// series it takes the highest value of each quantile (a conservative tail).
func summaryQuantiles(fams map[string]*dto.MetricFamily, name string, labels map[string]string, unit float64) (map[float64]float64, error) {
	ms, err := matching(fams, name, labels, dto.MetricType_SUMMARY)
	if err != nil {
		return nil, err
	}
	out := map[float64]float64{}
	for _, m := range ms {
		for _, q := range m.GetSummary().GetQuantile() {
			v := q.GetValue()
			if math.IsNaN(v) { // a summary with no observation in its window
				continue
			}
			if err := checkValue(name, v); err != nil {
				return nil, err
			}
			out[q.GetQuantile()] = max(out[q.GetQuantile()], v*unit)
		}
	}
	return out, nil
}
