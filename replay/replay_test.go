package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/internal/fieldtest"
	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/simserver/llm"
)

// A short replay runs the whole loop (under the race detector too): the
// static policy grants once and never acts, and every policy's work is
// measured against it.
func TestShortReplay(t *testing.T) {
	t.Parallel()
	results := mustRun(t, coarse(t, 3))
	if len(results) != len(DefaultPolicies) {
		t.Fatalf("got %d results, want one per default policy", len(results))
	}
	for i, r := range results {
		if r.Policy != DefaultPolicies[i] {
			t.Errorf("result %d is %s, want %s", i, r.Policy, DefaultPolicies[i])
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
	results := mustRun(t, coarse(t, 2, Forecast))
	if len(results) != 1 || results[0].Policy != Forecast || !(results[0].WorkVsStatic >= 0) {
		t.Fatalf("got %+v; want the forecast alone, measured against the static run", results)
	}
}

// best-static is the largest percentage of the grid with no minute over
// the SLO: the one above it has one.
func TestBestStaticIsTheLargestThatKeepsTheSLO(t *testing.T) {
	t.Parallel()
	cfg := coarse(t, 3, BestStatic)
	results := mustRun(t, cfg)
	b := results[0]
	if b.Policy != BestStatic || b.MinutesOver != 0 || b.Minutes != 3 || b.Throttles+b.Revokes != 0 {
		t.Fatalf("best-static: %+v; want 3 minutes judged, none over, no action", b)
	}
	if b.Pct >= cfg.Launcher.MaxPct {
		t.Fatalf("best-static at %d %%: the whole grid keeps the SLO, so this checks nothing; tighten the SLO", b.Pct)
	}
	if b.Pct > 0 && b.WorkPctSeconds != float64(b.Pct)*cfg.Trace[len(cfg.Trace)-1].Arrival.Seconds() {
		t.Errorf("work %g pct·s at %d %%", b.WorkPctSeconds, b.Pct)
	}
	above := cfg
	above.Launcher.MinPct, above.Launcher.MaxPct = b.Pct+10, b.Pct+10
	over := mustRun(t, above)
	if over[0].Pct != 0 { // the grid was b.Pct+10 alone, then none
		t.Errorf("%d %% keeps the SLO too, but best-static chose %d %%", b.Pct+10, b.Pct)
	}
}

func TestValidateNamesTheFields(t *testing.T) {
	t.Parallel()
	cfg := conversation(t, 20, 1)
	cfg.Service.SLOP99MS, cfg.ErrorFactor, cfg.Trace, cfg.Launcher.Profile = 0, -1, nil, nil
	_, err := Run(context.Background(), cfg)
	var l *field.List
	if !errors.As(err, &l) {
		t.Fatalf("err = %v, want a field list", err)
	}
	fieldtest.WantPaths(t, err, "service.slo_p99_ms", "trace", "error", "launcher.profile")
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
	tl := tally{}
	at := func(min int) time.Time { return start.Add(time.Duration(min)*time.Minute + time.Second) }
	for i := range 200 { // 1..200 ms, reversed
		tl.arrive(at(0))
		tl.latency(at(0), float64(200-i))
	}
	tl.arrive(at(1)) // two requests: not judged
	tl.arrive(at(1))
	tl.latency(at(1), 5)
	for i := range 100 {
		tl.arrive(at(2))
		tl.token(at(2), float64(i+1)) // tokens, to 1 %
	}
	for range 30 {
		tl.arrive(at(3)) // requests but no latency yet: not judged
	}
	got := tl.judge(20)
	if len(got) != 2 || got[0] != (MinuteStat{Minute: 0, Requests: 200, P99MS: 198}) || got[1].Minute != 2 || got[1].Requests != 100 {
		t.Fatalf("judge = %+v, want minutes 0 and 2", got)
	}
	if p := got[1].P99MS; !(p >= 99 && p <= 99*1.01) {
		t.Errorf("the tokens' p99 = %g, want 99 to within 1 %%", p)
	}
}

func TestSliceAndMeanRate(t *testing.T) {
	t.Parallel()
	var trace []llm.Request
	for _, a := range []time.Duration{0, 30 * time.Second, 61 * time.Second, 90 * time.Second, 150 * time.Second} {
		trace = append(trace, llm.Request{Arrival: a, PromptTokens: 7, OutputTokens: 3})
	}
	got := Slice(trace, time.Minute, time.Minute)
	if len(got) != 2 || got[0].Arrival != time.Second || got[1].Arrival != 30*time.Second || got[0].PromptTokens != 7 {
		t.Fatalf("Slice = %v, want the two requests at 1s and 30s with their tokens", got)
	}
	if got := Slice(trace, time.Minute, 0); len(got) != 3 {
		t.Fatalf("Slice to the end = %v, want 3 requests", got)
	}
	if r := MeanRate(trace); math.Abs(r-5.0/150) > 1e-12 {
		t.Errorf("MeanRate = %g, want 5 over 150 s", r)
	}
	if r := MeanRate(trace[:1]); r != 1 {
		t.Errorf("MeanRate of one request = %g, want 1 (over a second)", r)
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
	svg := SVG(`a <trace> & "its" SLO`, "req/s", 100, results)
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

// The default replay runs the LLM engine, judged by its inter-token
// latencies, and colocd plans for it as an engine: its service is the
// decode step at the busy fraction the engine showed alone.
func TestDefaultReplaysAnEngine(t *testing.T) {
	t.Parallel()
	cfg, err := Default(conversationMinutes(t, 20, 3))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine == nil || cfg.Service.BurstSteps < 1 || !(cfg.Service.RateRPS > 0) || cfg.Service.SLOP99MS != DefaultStepSLOMS {
		t.Fatalf("service %+v, engine %v; want an engine service on the LLM engine", cfg.Service, cfg.Engine != nil)
	}
	cfg.Requests, cfg.Service.BurstSteps, cfg.Policies = 200, 20, []Policy{Reactive} // a coarser prediction: this checks the loop
	results := mustRun(t, cfg)
	r := results[0]
	if r.Minutes != 3 || !(r.WorkVsStatic > 0) || r.WorstP99MS < 1 {
		t.Fatalf("reactive: %+v; want 3 minutes judged by their inter-token p99, and work done", r)
	}
	if obs := r.Series[len(r.Series)-1].ObservedRPS; !(obs > cfg.Service.RateRPS/10) {
		t.Errorf("observed %g steps/s at the end, want the engine's steps (planned %g)", obs, cfg.Service.RateRPS)
	}
}

func TestParseForecast(t *testing.T) {
	t.Parallel()
	base := observe.Forecast{Alpha: 0.5}
	got, err := ParseForecast(" beta=0.2, phi=1,burst=1.5 ,horizon=15s,", base)
	if err != nil || got != (observe.Forecast{Alpha: 0.5, Beta: 0.2, Phi: 1, Burst: 1.5, Horizon: 15 * time.Second}) {
		t.Fatalf("ParseForecast = %+v, %v", got, err)
	}
	for _, c := range []struct{ in, want string }{
		{"alpha", "want key=value"},
		{"gamma=1", "want one of alpha"},
		{"phi=x", "phi: want a number"},
		{"horizon=soon", "horizon: want a duration"},
		{"alpha=1.5", "forecast.alpha"},
		{"burst=-2", "forecast.burst"},
		{strings.Repeat("a", 300), "at most 256 bytes"},
	} {
		if _, err := ParseForecast(c.in, base); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseForecast(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func FuzzParseForecast(f *testing.F) {
	f.Add("alpha=0.5,beta=0.3,phi=0.9,burst=1,horizon=30s")
	f.Add("burst=NaN")
	f.Add("horizon=-1h,,=")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseForecast(s, observe.Forecast{})
		if err != nil {
			return
		}
		var c field.Checker
		if got.Validate(&c, "forecast"); c.Len() != 0 {
			t.Fatalf("ParseForecast(%q) = %+v, which does not validate: %v", s, got, c.Err("forecast"))
		}
	})
}

// The default replay takes the guard's keys and the headroom from their
// environment overrides, as colocd does: a setting is replayed as it would
// run.
func TestPrepareTakesTheGuardFromTheEnvironment(t *testing.T) {
	opts := Options{Trace: conversationTrace, Server: "predictor", Minutes: 2, Policies: []string{"forecast"}}
	cfg, err := Prepare(opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := admission.DefaultSettings().Headroom; cfg.Settings.Headroom != want {
		t.Errorf("headroom %g with no override, want colocd's default %g", cfg.Settings.Headroom, want)
	}
	t.Setenv("COLOCD_ADMISSION_GUARD_RESPONSE_QUANTILE", "0.5")
	t.Setenv("COLOCD_ADMISSION_GUARD_RAISE_STEP_PCT", "5")
	t.Setenv("COLOCD_ADMISSION_HEADROOM", "0.05")
	if cfg, err = Prepare(opts); err != nil {
		t.Fatal(err)
	}
	if g := cfg.Settings.Guard; g.ResponseQuantile != 0.5 || g.RaiseStepPct != 5 || g.RaiseAfter != admission.DefaultRaiseAfter {
		t.Errorf("guard %+v, want response_quantile 0.5, raise_step_pct 5 and the rest default", g)
	}
	if cfg.Settings.Headroom != 0.05 {
		t.Errorf("headroom %g, want the override's 0.05", cfg.Settings.Headroom)
	}
	if cfg.Settings.PctStep != 10 {
		t.Errorf("pct_step %d, want the default replay's 10", cfg.Settings.PctStep)
	}
}

// --step-buckets gives the engine's inter-token histogram the bounds asked
// for; it is refused with the predicted server, and with bounds out of
// order, naming the flag.
func TestPrepareTakesTheEnginesStepBuckets(t *testing.T) {
	t.Parallel()
	fine := []float64{0.1, 0.11, 0.12, 0.125, 0.13, 0.15}
	cfg, err := Prepare(Options{Trace: conversationTrace, Server: "llm", Minutes: 2, Policies: []string{"forecast"}, StepBuckets: fine})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine == nil || !slices.Equal(cfg.Engine.ITLBuckets, fine) {
		t.Errorf("engine %v, want its inter-token buckets %v", cfg.Engine, fine)
	}
	for _, o := range []Options{
		{Trace: conversationTrace, Server: "predictor", Minutes: 2, StepBuckets: fine},
		{Trace: conversationTrace, Server: "llm", Minutes: 2, StepBuckets: []float64{0.15, 0.1}},
	} {
		if _, err := Prepare(o); err == nil || !strings.Contains(err.Error(), "--step-buckets") {
			t.Errorf("server %s, buckets %v: %v, want an error naming --step-buckets", o.Server, o.StepBuckets, err)
		}
	}
}
