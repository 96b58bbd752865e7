package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/internal/fieldtest"
)

// A short replay runs the whole loop (under the race detector too): the
// static policy grants once and never acts, and every policy's work is
// measured against it.
func TestShortReplay(t *testing.T) {
	t.Parallel()
	cfg := conversation(t, 20, 3)
	cfg.Requests = 200 // a coarser prediction: this checks the loop, not the guard
	results, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(Policies) {
		t.Fatalf("got %d results, want one per policy", len(results))
	}
	for i, r := range results {
		if r.Policy != Policies[i] {
			t.Errorf("result %d is %s, want %s", i, r.Policy, Policies[i])
		}
		if r.Minutes != 3 || len(r.PerMinute) != 3 {
			t.Errorf("%s judged %d minutes (%d listed), want the 3 replayed", r.Policy, r.Minutes, len(r.PerMinute))
		}
		if len(r.Series) != 36 { // every 5 s for 3 minutes, less the last second's
			t.Errorf("%s has %d samples, want 36", r.Policy, len(r.Series))
		}
	}
	st := results[0]
	if st.WorkVsStatic != 1 || st.WorkPctSeconds == 0 || st.Throttles+st.Raises+st.Revokes+st.Evictions != 0 {
		t.Errorf("static: %+v; want work done, 1 of itself, and no action", st)
	}
	for _, s := range st.Series {
		if !math.IsNaN(s.ObservedRPS) {
			t.Fatalf("static observed %g at %s: it has no observer", s.ObservedRPS, s.At)
		}
	}
	if obs := results[1].Series[len(results[1].Series)-1].ObservedRPS; !(obs > 0) {
		t.Errorf("reactive: observed %g req/s at the end, want the server's rate", obs)
	}
}

func TestPoliciesOnlyThoseAsked(t *testing.T) {
	t.Parallel()
	cfg := conversation(t, 20, 2)
	cfg.Requests, cfg.Policies = 200, []Policy{Forecast}
	results, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Policy != Forecast || !(results[0].WorkVsStatic >= 0) {
		t.Fatalf("got %+v; want the forecast alone, measured against the static run", results)
	}
}

func TestValidateNamesTheFields(t *testing.T) {
	t.Parallel()
	cfg := conversation(t, 20, 1)
	cfg.Service.SLOP99MS, cfg.ErrorFactor, cfg.Arrivals, cfg.Launcher.Profile = 0, -1, nil, nil
	_, err := Run(context.Background(), cfg)
	var l *field.List
	if !errors.As(err, &l) {
		t.Fatalf("err = %v, want a field list", err)
	}
	fieldtest.WantPaths(t, err, "service.slo_p99_ms", "arrivals", "error", "launcher.profile")
}

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	for _, p := range Policies {
		if got, err := ParsePolicy(string(p)); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %q, %v", p, got, err)
		}
	}
	if _, err := ParsePolicy("psychic"); err == nil || !strings.Contains(err.Error(), "static, reactive, forecast") {
		t.Errorf("ParsePolicy(psychic) = %v, want an error naming the policies", err)
	}
}

func TestJudgeTakesNearestRankP99(t *testing.T) {
	t.Parallel()
	lat := make([]float64, 200)
	for i := range lat {
		lat[i] = float64(200 - i) // 1..200 ms, reversed
	}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	got := judge(map[int][]float64{0: lat, 1: {5, 6}, 2: hundred}, 20)
	want := []MinuteStat{{Minute: 0, Requests: 200, P99MS: 198}, {Minute: 2, Requests: 100, P99MS: 99}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("judge = %+v, want %+v (a minute of 2 requests is not judged)", got, want)
	}
}

func TestSliceAndMeanRate(t *testing.T) {
	t.Parallel()
	a := []time.Duration{0, 30 * time.Second, 61 * time.Second, 90 * time.Second, 150 * time.Second}
	got := Slice(a, time.Minute, time.Minute)
	if len(got) != 2 || got[0] != time.Second || got[1] != 30*time.Second {
		t.Fatalf("Slice = %v, want [1s 30s]", got)
	}
	if got := Slice(a, time.Minute, 0); len(got) != 3 {
		t.Fatalf("Slice to the end = %v, want 3 arrivals", got)
	}
	if r := MeanRate(a); math.Abs(r-5.0/150) > 1e-12 {
		t.Errorf("MeanRate = %g, want 5 over 150 s", r)
	}
	if r := MeanRate(a[:1]); r != 1 {
		t.Errorf("MeanRate of one arrival = %g, want 1 (over a second)", r)
	}
}

// The picture is well-formed SVG with two plots a policy and the SLO.
func TestSVGIsWellFormed(t *testing.T) {
	t.Parallel()
	results := []Result{
		{Policy: Static, Minutes: 2, PerMinute: []MinuteStat{{0, 60, 80}, {1, 70, 130}},
			Series: []Sample{{At: 0, ArrivalRPS: 1, ObservedRPS: math.NaN(), ForecastRPS: math.NaN(), Pct: 50}, {At: time.Minute, ArrivalRPS: 2, ObservedRPS: math.NaN(), ForecastRPS: math.NaN(), Pct: 50}}},
		{Policy: Forecast, Minutes: 2, PerMinute: []MinuteStat{{0, 60, 70}},
			Series: []Sample{{At: 0, ArrivalRPS: 1, ObservedRPS: 1, ForecastRPS: 2, Pct: 30}, {At: time.Minute, ArrivalRPS: 2, ObservedRPS: 2, ForecastRPS: math.Inf(1), Pct: 10}}},
	}
	svg := SVG(`a <trace> & "its" SLO`, 100, results)
	d := xml.NewDecoder(bytes.NewReader(svg))
	rects, circles := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed XML: %v\n%s", err, svg)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "rect":
				rects++
			case "circle":
				circles++
			}
		}
	}
	if circles != 3 {
		t.Errorf("%d p99 points, want one per judged minute (3)", circles)
	}
	if !bytes.Contains(svg, []byte(`stroke="#d62728" stroke-dasharray`)) || !bytes.Contains(svg, []byte("static: load")) || !bytes.Contains(svg, []byte("forecast: p99")) {
		t.Errorf("the SLO line or a policy's plots are missing:\n%s", svg)
	}
}

// --json's keys are the documented ones.
func TestResultJSONKeys(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(Result{Policy: Reactive, Series: []Sample{{}}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "minutes", "minutes_over", "work_vs_static", "throttles", "raises", "revokes", "evictions", "worst_p99_ms"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON %s lacks %q", data, k)
		}
	}
	if _, ok := got["Series"]; ok {
		t.Errorf("JSON %s carries the series", data)
	}
}
