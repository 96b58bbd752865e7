package simserver

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// MaxArrivals bounds a trace, and MaxTraceBytes its file.
const (
	MaxArrivals   = 10_000_000
	MaxTraceBytes = 256 << 20
)

// timestampLayouts are the forms of the Azure traces' TIMESTAMP column.
var timestampLayouts = []string{"2006-01-02 15:04:05.9999999", "2006-01-02 15:04:05", time.RFC3339Nano}

// ParseTrace reads a CSV trace with a TIMESTAMP column (the Azure LLM
// inference traces: other columns are ignored) and returns each request's
// arrival as an offset from the first, in order.
func ParseTrace(r io.Reader) ([]time.Duration, error) {
	lr := &io.LimitedReader{R: r, N: MaxTraceBytes + 1}
	cr := csv.NewReader(lr)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("trace: header: want a CSV header with a TIMESTAMP column: %w", err)
	}
	col := slices.IndexFunc(head, func(h string) bool {
		return strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")), "TIMESTAMP")
	})
	if col < 0 {
		return nil, fmt.Errorf("trace: header: want a TIMESTAMP column, got %q", clip(strings.Join(head, ",")))
	}
	var times []time.Time
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if lr.N <= 0 {
			return nil, fmt.Errorf("trace: more than %d bytes", MaxTraceBytes)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace: line %d: %w", line, err)
		}
		if col >= len(rec) {
			return nil, fmt.Errorf("trace: line %d: TIMESTAMP: want a time, got no field", line)
		}
		t, err := parseTimestamp(strings.TrimSpace(rec[col]))
		if err != nil {
			return nil, fmt.Errorf("trace: line %d: TIMESTAMP: want a time like 2023-11-16 18:15:46.6805900, got %q", line, clip(rec[col]))
		}
		if len(times) == MaxArrivals {
			return nil, fmt.Errorf("trace: more than %d requests", MaxArrivals)
		}
		times = append(times, t)
	}
	if len(times) == 0 {
		return nil, errors.New("trace: no requests")
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	span := times[len(times)-1].Sub(times[0])
	if span < 0 || span > 366*24*time.Hour {
		return nil, fmt.Errorf("trace: spans %s, want at most a year", span)
	}
	out := make([]time.Duration, len(times))
	for i, t := range times {
		out[i] = t.Sub(times[0])
	}
	return out, nil
}

func parseTimestamp(s string) (time.Time, error) {
	var err error
	for _, layout := range timestampLayouts {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
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

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
