package sidecar

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/observe"
)

// The guard warns where its limit lies in a histogram bucket too wide to
// see the p99 in (vLLM's 100 to 150 ms around a 125 ms SLO), and nowhere
// else.
func TestCoarseLimit(t *testing.T) {
	t.Parallel()
	svc := admission.ServiceSpec{Name: "chat", SLOP99MS: 125}
	for _, tt := range []struct {
		name     string
		lo, hi   float64
		headroom float64
		warn     bool
	}{
		{"vllm's bucket holds the limit", 100, 150, 0.1, true},
		{"the limit at the bucket's upper bound", 100, 125, 0, true},
		{"a bucket as fine as a tenth of the SLO", 110, 122.5, 0.1, false},
		{"the p99 below the limit's bucket", 75, 100, 0.1, false},
		{"the p99 above it", 150, 200, 0.1, false},
		{"the +Inf bucket", 150, math.Inf(1), 0, false},
		{"a summary: no bucket", math.NaN(), math.NaN(), 0.1, false},
	} {
		msg := coarseLimit(svc, tt.headroom, observe.Observation{Stats: observe.Stats{P99LowMS: tt.lo, P99HighMS: tt.hi}})
		if (msg != "") != tt.warn {
			t.Errorf("%s: %q, want a warning: %v", tt.name, msg, tt.warn)
		}
		if tt.warn && !strings.Contains(msg, "service chat") || tt.warn && !strings.Contains(msg, "a bound at the SLO") {
			t.Errorf("%s: %q, want the service and what to do named", tt.name, msg)
		}
	}

	var buf bytes.Buffer
	w := newWatchedServices(slog.New(slog.NewTextHandler(&buf, nil)), nil)
	at := func(lo, hi float64) observe.Observation {
		return observe.Observation{Stats: observe.Stats{P99LowMS: lo, P99HighMS: hi}}
	}
	for _, o := range []observe.Observation{at(100, 150), at(100, 150), at(75, 100), at(100, 150)} {
		w.warnCoarse(svc, 0.1, o)
	}
	w.warnCoarse(svc, 0, at(100, 125)) // another bucket: warned of again
	if n := strings.Count(buf.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings, want 2 (once for each bucket):\n%s", n, buf.String())
	}
}
