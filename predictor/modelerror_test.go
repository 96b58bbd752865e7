package predictor

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

func fitOf(metrics ...MetricFit) *FitReport {
	return &FitReport{PerRecord: []RecordFit{{Name: "r", Metrics: metrics}}}
}

func TestModelErrorSD(t *testing.T) {
	t.Parallel()
	cv := func(v float64) *float64 { return &v }
	e := math.E
	f := fitOf(
		MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 10 * e},                      // log error +1
		MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 10 / e},                      // −1
		MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 10, CVPredicted: cv(10 * e)}, // the CV one counts: +1
		MetricFit{Field: "latency_ms.mean", Measured: 5, Predicted: 5 * e * e},                   // +2
		MetricFit{Field: "service_ms.mean", Measured: 0, Predicted: 3},                           // no measurement: skipped
	)
	if got := f.ModelErrorSD("latency_ms.p99"); math.Abs(got-1) > 1e-12 {
		t.Errorf("p99: sd %v, want 1 (three values of |log| 1, the CV prediction in place of the in-sample one)", got)
	}
	// One value of the mean: the latency figures together stand in, RMS of (1, −1, 1, 2).
	if got, want := f.ModelErrorSD("latency_ms.mean"), math.Sqrt(7.0/4); math.Abs(got-want) > 1e-12 {
		t.Errorf("mean: sd %v, want %v", got, want)
	}
	if got := f.ModelErrorSD("service_ms.p99"); got != 0 {
		t.Errorf("service: sd %v, want 0 (no usable value)", got)
	}
	var none *FitReport
	if got := none.ModelErrorSD("latency_ms.p99"); got != 0 {
		t.Errorf("no fit: sd %v, want 0", got)
	}
	// In-sample misses of a fit with two parameters: four values of |log| 1
	// have two degrees of freedom, too few alone, and the kind's six (ss 9,
	// four more of them) stand in: sd² = 9/(6−2). Cross-validated misses keep
	// all their degrees of freedom.
	var ms []MetricFit
	for range 4 {
		ms = append(ms, MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 10 * e})
	}
	ms = append(ms, MetricFit{Field: "latency_ms.mean", Measured: 5, Predicted: 5 * e}, MetricFit{Field: "latency_ms.p50", Measured: 5, Predicted: 5 * e * e})
	two := fitOf(ms...)
	two.Parameters = []ParameterFit{{Name: "a"}, {Name: "b"}}
	if sd, df := two.ModelError("latency_ms.p99"); df != 4 || math.Abs(sd-1.5) > 1e-12 {
		t.Errorf("in-sample, two parameters: sd %v with %d degrees of freedom, want 1.5 with 4", sd, df)
	}
	for i := range two.PerRecord[0].Metrics {
		m := &two.PerRecord[0].Metrics[i]
		m.CVPredicted = cv(m.Predicted)
	}
	if sd, df := two.ModelError("latency_ms.p99"); df != 4 || math.Abs(sd-1) > 1e-12 {
		t.Errorf("cross-validated: sd %v with %d degrees of freedom, want 1 with 4", sd, df)
	}
}

func TestWidenByModelError(t *testing.T) {
	t.Parallel()
	// Every latency figure was predicted 2× too high once and 2× too low once: sd = ln 2.
	var ms []MetricFit
	for _, k := range []string{"mean", "p50", "p90", "p95", "p99"} {
		ms = append(ms, MetricFit{Field: "latency_ms." + k, Measured: 10, Predicted: 20},
			MetricFit{Field: "latency_ms." + k, Measured: 10, Predicted: 5})
	}
	fit := fitOf(ms...)
	pt := Percentiles{Mean: 10, P50: 10, P90: 10, P95: 10, P99: 10}
	sp := InferencePrediction{LatencyMS: pt, ServiceMS: pt,
		LatencyInterval: Intervals{Confidence: 0.9, Mean: Interval{9, 11}, P50: Interval{9, 11}, P90: Interval{9, 11}, P95: Interval{9, 11}, P99: Interval{7, 13}},
		ServiceInterval: Intervals{Confidence: 0.9, P99: Interval{10, 10}}}
	pred := &Prediction{Services: []InferencePrediction{sp}}
	if !WidenByModelError(fit, pred) {
		t.Fatal("nothing widened")
	}
	// Two values per figure are too few alone: the ten latency misses
	// stand in, ten degrees of freedom. Student's t quantile of 0.95 with
	// them (a two-sided 90 % interval; the normal's is 1.645).
	z := 1.8124611228107335
	up, down := 10*(math.Exp(z*math.Ln2)-1), 10*(1-math.Exp(-z*math.Ln2))
	got := pred.Inference.LatencyInterval.P99
	want := Interval{10 - math.Sqrt(9+down*down), 10 + math.Sqrt(9+up*up)}
	if math.Abs(got[0]-want[0]) > 1e-9 || math.Abs(got[1]-want[1]) > 1e-9 {
		t.Errorf("p99 interval %v, want %v", got, want)
	}
	if !pred.Inference.ModelUncertainty {
		t.Error("ModelUncertainty not set")
	}
	// The service figures had no measurement of their kind: unchanged.
	if got := pred.Inference.ServiceInterval.P99; got != (Interval{10, 10}) {
		t.Errorf("service p99 interval %v, want it unchanged", got)
	}
	// A large error never takes the lower end below zero.
	far := fitOf(MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 30}, MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 30},
		MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 30})
	wide := &Prediction{Services: []InferencePrediction{{LatencyMS: pt, LatencyInterval: Intervals{Confidence: 0.9, P99: Interval{2, 12}}}}}
	WidenByModelError(far, wide)
	if lo := wide.Inference.LatencyInterval.P99[0]; lo < 0 {
		t.Errorf("p99 interval's lower end %v, want ≥ 0", lo)
	}
	// A fit without per-record figures widens nothing.
	before := pred.Services[0].LatencyInterval
	if WidenByModelError(&FitReport{MAPE: 0.3}, pred) || pred.Services[0].LatencyInterval != before {
		t.Error("a fit without per-record figures widened the intervals")
	}
}

// TestModelErrorBound: cross-validated misses with a heavy tail (eight of
// |log| 0.1 and one of 1) get the conformal floor where the t bound falls
// short of it, the t bound where it does not, and in-sample misses the t
// bound alone; the bound never falls as the confidence rises.
func TestModelErrorBound(t *testing.T) {
	t.Parallel()
	cv := func(v float64) *float64 { return &v }
	var outOf, in []MetricFit
	for i := range 9 {
		l := 0.1
		if i == 8 {
			l = -1
		}
		if i%2 == 1 {
			l = -l // the sign does not matter
		}
		outOf = append(outOf, MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 10, CVPredicted: cv(10 * math.Exp(l))})
		in = append(in, MetricFit{Field: "latency_ms.p99", Measured: 10, Predicted: 10 * math.Exp(l)})
	}
	sd := math.Sqrt((8*0.01 + 1) / 9)
	tq := func(c float64, df int) float64 {
		return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile((1 + c) / 2)
	}
	fit := fitOf(outOf...)
	for _, tc := range []struct {
		conf, want float64
		why        string
	}{
		{0.9, 1, "k = ⌈0.9·10⌉ = 9: the largest miss, above t·sd = 0.63"},
		{0.95, 1, "k = 10 > 9: the largest miss"},
		{0.5, tq(0.5, 9) * sd, "k = 5: a miss of 0.1, below t·sd"},
	} {
		if got := fit.ModelErrorBound("latency_ms.p99", tc.conf); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("cross-validated, confidence %v: bound %v, want %v (%s)", tc.conf, got, tc.want, tc.why)
		}
	}
	if tq(0.9, 9)*sd >= 1 {
		t.Fatalf("t bound %v: the case does not show the floor", tq(0.9, 9)*sd)
	}
	inFit := fitOf(in...)
	inFit.Parameters = []ParameterFit{{Name: "a"}}
	inSD := math.Sqrt((8*0.01 + 1) / 8)
	if got, want := inFit.ModelErrorBound("latency_ms.p99", 0.9), tq(0.9, 8)*inSD; math.Abs(got-want) > 1e-12 {
		t.Errorf("in-sample: bound %v, want t·sd = %v alone", got, want)
	}
	prev := 0.0
	for c := 0.05; c < 1; c += 0.05 {
		b := fit.ModelErrorBound("latency_ms.p99", c)
		if b < prev {
			t.Errorf("bound %v at confidence %.2f, below %v at the level before", b, c, prev)
		}
		prev = b
	}
	if got := fit.ModelErrorBound("service_ms.p99", 0.9); got != 0 {
		t.Errorf("no misses of the kind: bound %v, want 0", got)
	}
	// WidenByModelError adds the floor, a factor e either way, in
	// quadrature to a point interval.
	pred := &Prediction{Services: []InferencePrediction{{LatencyMS: Percentiles{P99: 10},
		LatencyInterval: Intervals{Confidence: 0.9, P99: Interval{10, 10}}}}}
	WidenByModelError(fit, pred)
	if got, want := pred.Inference.LatencyInterval.P99, (Interval{10 / math.E, 10 * math.E}); math.Abs(got[0]-want[0]) > 1e-9 || math.Abs(got[1]-want[1]) > 1e-9 {
		t.Errorf("p99 interval %v, want %v", got, want)
	}
}
