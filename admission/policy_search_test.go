package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/colocd/colocd/predictor"
)

func TestPctGrid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		min, max, step int
		want           []int
	}{
		{"one point", 50, 50, 5, []int{50}},
		{"aligned", 10, 30, 10, []int{10, 20, 30}},
		{"max off the step", 10, 25, 10, []int{10, 20, 25}},
		{"full range step 5", 10, 100, 5, []int{10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 95, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pctGrid(tt.min, tt.max, tt.step); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// shapes are monotone p99 curves (ms against percent) the search must
// handle: the model's is close to linear, with a knee where SMs run out.
var shapes = map[string]func(x float64) float64{
	"linear":  func(x float64) float64 { return 55 + 1.1*x },
	"convex":  func(x float64) float64 { return 55 + 0.012*x*x },
	"concave": func(x float64) float64 { return 55 + 11*math.Sqrt(x) },
	"knee": func(x float64) float64 {
		if x < 50 {
			return 60 + 0.2*x
		}
		return 70 + 10*(x-50)
	},
	"v100 at 20 req/s": func(x float64) float64 { // the model's, 10 % to 100 % in steps of 10
		v := []float64{106.1, 130.5, 158.8, 196.1, 314.0, 500.5, 716.2, 927.8, 1148.1, 1364.2}
		i := min(max(int(x/10)-1, 0), 8)
		return v[i] + (v[i+1]-v[i])*(x-float64(10*(i+1)))/10
	},
	"flat then step": func(x float64) float64 {
		if x < 73 {
			return 80
		}
		return 200
	},
}

// TestSearchGridMatchesLinearScan checks the search against a linear scan
// on every shape, for limits across the whole range, grids of 1 to 25
// points and 1 to 5 workers, and bounds its predictions: one for a grant,
// two for a deny, and for a throttle on one worker at most three rounds per
// halving (on the near-linear shape, at most 4 predictions in all).
func TestSearchGridMatchesLinearScan(t *testing.T) {
	t.Parallel()
	for name, f := range shapes {
		for _, grid := range [][]int{{50}, {10, 100}, pctGrid(10, 100, 5), pctGrid(1, 100, 4), pctGrid(33, 97, 7)} {
			for limit := 50.0; limit < 1500; limit *= 1.007 {
				want := -1 // the linear scan
				for i, x := range grid {
					if f(float64(x)) <= limit {
						want = i
					}
				}
				for workers := 1; workers <= 5; workers++ {
					var evals, inFlight, maxInFlight atomic.Int64
					cached := workers%2 == 0 // every point known: rounds run one point at a time
					got, err := searchGrid(context.Background(), grid, workers, func(_ context.Context, i int) (probe, error) {
						evals.Add(1)
						n := inFlight.Add(1)
						defer inFlight.Add(-1)
						for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
						}
						p := f(float64(grid[i]))
						return probe{fits: p <= limit, score: p / limit, soloScore: 55 / limit}, nil
					}, func(int) bool { return cached })
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("%s, grid %v, limit %g, %d workers: got %d, want %d", name, grid, limit, workers, got, want)
					}
					if cached && maxInFlight.Load() != 1 {
						t.Fatalf("%s, grid %v, %d workers: %d known points evaluated at once, want one at a time", name, grid, workers, maxInFlight.Load())
					}
					n, e := len(grid), int(evals.Load())
					bound := 1 + 3*bitsLen(n)
					if name == "linear" {
						bound = 4
					}
					switch {
					case workers > 1:
						if e > n {
							t.Errorf("%s, grid %v, limit %g, %d workers: %d predictions", name, grid, limit, workers, e)
						}
					case want == n-1 && e != 1:
						t.Errorf("%s, grid %v, limit %g: a grant took %d predictions", name, grid, limit, e)
					case want == -1 && n > 1 && f(float64(grid[0])) > limit && 55 > limit && e != 2:
						t.Errorf("%s, grid %v, limit %g: a deny took %d predictions", name, grid, limit, e)
					case e > bound:
						t.Errorf("%s, grid %v, limit %g: %d predictions, want ≤ %d", name, grid, limit, e, bound)
					}
				}
			}
		}
	}
}

// TestSearchGuessAbove: the benchmark's throttle (the model's p99 for the
// real V100 profiles, 10 % to 100 % in steps of 5, limit 108 ms). After
// 100 % fails, the chord from the solo p99 puts the crossing at 46 %; the
// convex p99 crosses just above 50 %, and the point at or above the guess
// is 50 %: three predictions (the point below, 45 %, took four). Over every
// test shape, grid and limit, a throttle costs fewer predictions on
// average than with the point below (5.23).
func TestSearchGuessAbove(t *testing.T) {
	t.Parallel()
	p99 := []float64{66.2, 71.6, 76.9, 81.3, 85.4, 89.9, 93.7, 99.2, 106.2, 113.1, 119.9, 126.6, 132.1, 139.1, 144.4, 149.9, 155.8, 163.2, 168.8}
	grid := pctGrid(10, 100, 5)
	const limit, solo = 108.0, 55.0
	var tried []int
	got, err := searchGrid(context.Background(), grid, 1, func(_ context.Context, i int) (probe, error) {
		tried = append(tried, grid[i])
		return probe{fits: p99[i] <= limit, score: p99[i] / limit, soloScore: solo / limit}, nil
	}, nil)
	if err != nil || grid[got] != 50 {
		t.Fatalf("got %d %% (%v), want 50 %%", grid[max(got, 0)], err)
	}
	if want := []int{100, 50, 55}; !slices.Equal(tried, want) {
		t.Errorf("tried %v, want %v", tried, want)
	}

	evals, throttles := 0, 0
	for _, f := range shapes {
		for _, grid := range [][]int{pctGrid(10, 100, 5), pctGrid(1, 100, 4), pctGrid(33, 97, 7), pctGrid(10, 100, 10)} {
			for limit := 50.0; limit < 1500; limit *= 1.007 {
				if f(float64(grid[len(grid)-1])) <= limit || f(float64(grid[0])) > limit {
					continue // a grant or a deny: the guess plays no part
				}
				if _, err := searchGrid(context.Background(), grid, 1, func(_ context.Context, i int) (probe, error) {
					evals++
					p := f(float64(grid[i]))
					return probe{fits: p <= limit, score: p / limit, soloScore: 55 / limit}, nil
				}, nil); err != nil {
					t.Fatal(err)
				}
				throttles++
			}
		}
	}
	if mean := float64(evals) / float64(throttles); mean > 4.8 {
		t.Errorf("%.3f predictions per throttle over %d, want at most 4.8 (4.74 with the point above)", mean, throttles)
	}
}

func bitsLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

func TestSearchGridError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, workers := range []int{1, 3} {
		_, err := searchGrid(context.Background(), pctGrid(10, 100, 10), workers, func(_ context.Context, i int) (probe, error) {
			if i == 0 {
				return probe{}, boom
			}
			return probe{score: 2}, nil
		}, nil)
		if !errors.Is(err, boom) {
			t.Errorf("workers %d: got %v, want boom", workers, err)
		}
	}
}

// TestSearchGridNotMonotone: a fit above a failure does not count.
func TestSearchGridNotMonotone(t *testing.T) {
	t.Parallel()
	fits := []bool{true, true, false, true, true}
	got, err := searchGrid(context.Background(), []int{10, 20, 30, 40, 50}, 5, func(_ context.Context, i int) (probe, error) {
		return probe{fits: fits[i], score: 1}, nil
	}, nil)
	if err != nil || got != 1 {
		t.Errorf("got %d, %v; want 1", got, err)
	}
}

// largestWithin is the largest percentage of grid whose p99 (p99s, by
// grid's index) is within limit; -1 where none is.
func largestWithin(grid []int, p99s []float64, limit float64) int {
	largest := -1
	for i, pct := range grid {
		if p99s[i] <= limit {
			largest = pct
		}
	}
	return largest
}

// TestDecideMatchesLinearScan: the percentage a decision grants is the
// largest on the grid whose p99, predicted by the predictor directly, is
// within the limit — for several SLOs, with one worker and with four.
func TestDecideMatchesLinearScan(t *testing.T) {
	t.Parallel()
	grid := pctGrid(10, 100, 10)
	p99 := make([]float64, len(grid))
	for i, pct := range grid {
		p99[i] = resnetP99(t, float64(pct))
	}
	for _, slo := range []float64{6, 7.8, 8.2, 8.5, 9, 10, 11.5, 13, 20} {
		want := largestWithin(grid, p99, 0.9*slo)
		for _, workers := range []int{1, 4} {
			t.Run(fmt.Sprintf("slo=%g/workers=%d", slo, workers), func(t *testing.T) {
				f := newTestPolicy(t, predictor.ModeMPS, slo, func(c *Config) { c.SearchWorkers = workers })
				d, err := f.decide(t, request("r1"), nil)
				if err != nil {
					t.Fatal(err)
				}
				got := grantedPct(d)
				if d.Outcome != Deny {
					if i := slices.Index(grid, got); d.Predictions[0].PredictedP99MS != p99[i] {
						t.Errorf("predicted p99 %v at %d %%, the predictor says %v", d.Predictions[0].PredictedP99MS, got, p99[i])
					}
				}
				if got != want {
					t.Errorf("got %d %% (%s: %s), want %d %%", got, d.Outcome, d.Message, want)
				}
			})
		}
	}
}

// TestDecideHoldsUpperBound: at a confidence, a decision holds the upper
// end of the p99's interval to the limit, and reports it beside the point
// estimate, which stays what the predictor says; it grants no more than
// the point estimate would, and less where the interval straddles the
// limit.
func TestDecideHoldsUpperBound(t *testing.T) {
	t.Parallel()
	svc := bert()
	grid := pctGrid(10, 100, 10)
	point, upper := make([]float64, len(grid)), make([]float64, len(grid))
	for i, pct := range grid {
		sc := &predictor.Scenario{Inference: svc.Profile, Training: []*predictor.Profile{trainingProfile("resnet")}, RateRPS: svc.RateRPS,
			Requests: testRequests, Seed: 1, TrainingPct: []float64{float64(pct)}, Confidence: 0.95}
		pred := predictDirectly(t, predictor.ModeMPS, sc, testCal())
		point[i], upper[i] = pred.Inference.LatencyMS.P99, pred.Inference.LatencyInterval.P99[1]
		if upper[i] < point[i] {
			t.Fatalf("at %d %%: upper end %v below the point %v", pct, upper[i], point[i])
		}
	}
	m, err := NewModel(testCal(), testRequests, 1, 0, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	stricter := 0
	for _, slo := range []float64{8.2, 9, 10, 11.5, 13, 20} {
		wantUpper, wantPoint := largestWithin(grid, upper, 0.9*slo), largestWithin(grid, point, 0.9*slo)
		if wantUpper < wantPoint {
			stricter++
		}
		t.Run(fmt.Sprintf("slo=%g", slo), func(t *testing.T) {
			f := newTestPolicyWith(t, m, predictor.ModeMPS, slo, nil)
			d, err := f.decide(t, request("r1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := grantedPct(d)
			if d.Outcome != Deny {
				i := slices.Index(grid, got)
				if sp := d.Predictions[0]; sp.PredictedP99MS != point[i] || sp.UpperP99MS != upper[i] {
					t.Errorf("at %d %%: predicted %v up to %v, the predictor says %v up to %v", got, sp.PredictedP99MS, sp.UpperP99MS, point[i], upper[i])
				}
			} else if !strings.Contains(d.Message, " ms (up to ") {
				t.Errorf("a deny that does not name the upper bound: %s", d.Message)
			}
			if got != wantUpper {
				t.Errorf("got %d %% (%s: %s), want %d %% (the point estimate alone would grant %d %%)", got, d.Outcome, d.Message, wantUpper, wantPoint)
			}
		})
	}
	if stricter == 0 {
		t.Error("no SLO where the bound grants less than the point estimate: the test shows nothing")
	}
}

// TestDecidePredictsServicesTogether: with two services on the GPU, each
// service's predicted p99 in a decision is what the predictor gives with
// both services and the trainer together (the first service first, in the
// config's order), one simulation answers for both, and the second
// service's load leaves the trainer less than it gets next to the first
// alone.
func TestDecidePredictsServicesTogether(t *testing.T) {
	t.Parallel()
	first := ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100, SLOP99MS: 12}
	second := ServiceSpec{Name: "gpt", Profile: inferenceProfile("gpt"), RateRPS: 60, SLOP99MS: 12}
	decide := func(svcs []ServiceSpec) (Decision, *policyFixture) {
		f := newTestPolicy(t, predictor.ModeMPS, 12, func(c *Config) { c.Services = svcs })
		d, err := f.decide(t, request("r1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return d, f
	}
	alone, _ := decide([]ServiceSpec{first})
	both, f := decide([]ServiceSpec{first, second})
	if alone.Outcome == Deny || both.Outcome == Deny {
		t.Fatalf("decisions %s (%s) and %s (%s): want a grant in both", alone.Outcome, alone.Message, both.Outcome, both.Message)
	}
	t.Logf("granted %d %% next to one service, %d %% next to two", alone.Pct, both.Pct)
	if !(both.Pct < alone.Pct) {
		t.Errorf("granted %d %% next to two services, %d %% next to one: want less", both.Pct, alone.Pct)
	}
	cal := testCal()
	sc := &predictor.Scenario{Inference: first.Profile, RateRPS: first.RateRPS, Requests: testRequests, Seed: 1,
		Others:   []predictor.OtherService{{Profile: second.Profile, RateRPS: second.RateRPS}},
		Training: []*predictor.Profile{trainingProfile("resnet")}, TrainingPct: []float64{float64(both.Pct)}}
	var pr predictor.Predictor
	pred, err := pr.PredictMPS(sc, cal.MPS.Params())
	if err != nil {
		t.Fatal(err)
	}
	if len(both.Predictions) != 2 {
		t.Fatalf("%d predictions, want 2", len(both.Predictions))
	}
	for j, sp := range both.Predictions {
		if sp.Service != pred.Services[j].Name || sp.PredictedP99MS != pred.Services[j].LatencyMS.P99 {
			t.Errorf("prediction %d: %s at %v ms, the predictor says %s at %v ms", j, sp.Service, sp.PredictedP99MS, pred.Services[j].Name, pred.Services[j].LatencyMS.P99)
		}
	}
	// Every percentage the search tried cost one simulation for both services.
	if st := f.model.Stats(); st.Hits < st.Misses {
		t.Errorf("%d simulations and %d cache hits: the second service's figure should come with the first's", st.Misses, st.Hits)
	}
}

// An LLM engine's SLO is on its step latency: the decision holds the
// step's p99 (service_ms, as `colocd predict --burst-steps` prints it) to
// the step SLO, says so, and a tighter step SLO grants less.
func TestDecideEngineStepSLO(t *testing.T) {
	t.Parallel()
	step := inferenceProfile("bert") // one engine step, for the test
	decide := func(slo float64) (Decision, ServiceSpec) {
		svc := ServiceSpec{Name: "llama", Profile: step, RateRPS: 0.5 * 1e6 / step.SoloUS(), SLOP99MS: slo, BurstSteps: 16}
		f := newTestPolicy(t, predictor.ModeMPS, 12, func(c *Config) { c.Services = []ServiceSpec{svc} })
		d, err := f.decide(t, request("r1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return d, svc
	}
	loose, svc := decide(100)
	if loose.Outcome == Deny {
		t.Fatalf("%s: %s", loose.Outcome, loose.Message)
	}
	sp := loose.Predictions[0]
	if !sp.Step || !strings.Contains(loose.Message, "llama step p99") || !strings.Contains(loose.Message, "step SLO 100 ms") {
		t.Errorf("step %v, message %q: want the step p99 and the step SLO named", sp.Step, loose.Message)
	}
	sc := &predictor.Scenario{Inference: step, RateRPS: svc.RateRPS, BurstSteps: 16, Requests: testRequests, Seed: 1,
		Training: []*predictor.Profile{trainingProfile("resnet")}, TrainingPct: []float64{float64(loose.Pct)}}
	var pr predictor.Predictor
	pred, err := pr.PredictMPS(sc, testCal().MPS.Params())
	if err != nil {
		t.Fatal(err)
	}
	if in := pred.Inference; sp.PredictedP99MS != in.ServiceMS.P99 || sp.SoloP99MS != in.SoloServiceMS.P99 {
		t.Errorf("predicted %v ms (solo %v), the predictor's step p99 %v ms (solo %v)", sp.PredictedP99MS, sp.SoloP99MS, in.ServiceMS.P99, in.SoloServiceMS.P99)
	}
	// Between the solo step and the granted one: a limit there throttles.
	tight, _ := decide((sp.SoloP99MS + sp.PredictedP99MS) / 2 / 0.9)
	if tight.Outcome == Deny || !(tight.Pct < loose.Pct) {
		t.Errorf("tight step SLO: %s %s, want a lower percentage than %d %%", tight.Outcome, tight.Message, loose.Pct)
	}
}
