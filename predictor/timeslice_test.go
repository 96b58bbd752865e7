package predictor

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/fieldtest"
)

// uniformProfile builds a profile of n ops of durUS each, each preceded by gapUS.
func uniformProfile(name string, kind Kind, n int, durUS, gapUS float64) *Profile {
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op{DurUS: durUS, GapUS: gapUS, SM: 1, Occupancy: 1}
	}
	return &Profile{Format: ProfileFormat, Name: name, Kind: kind, Ops: ops}
}

var testParams = TimesliceParams{SliceUS: 1000, SwitchUS: 50, HoldoverUS: 200}

func predictTS(t *testing.T, sc *Scenario, p TimesliceParams) *Prediction {
	t.Helper()
	var pr Predictor
	return mustPredict(t, "PredictTimeslice")(pr.PredictTimeslice(sc, p))
}

// mustPredict returns what the Predictor method name returned, and ends
// the test if it failed.
func mustPredict(t *testing.T, name string) func(*Prediction, error) *Prediction {
	return func(pred *Prediction, err error) *Prediction {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return pred
	}
}

// predictIn predicts sc under mode with pr: time slicing with ts, or MPS
// with mps and every trainer at 50 %. It ends the test if that failed.
func predictIn(t *testing.T, pr *Predictor, mode Mode, sc *Scenario, ts TimesliceParams, mps MPSParams) *Prediction {
	t.Helper()
	if mode != ModeMPS {
		return mustPredict(t, "PredictTimeslice")(pr.PredictTimeslice(sc, ts))
	}
	if len(sc.Training) > 0 {
		sc.TrainingPct = slices.Repeat([]float64{50}, len(sc.Training))
	}
	return mustPredict(t, "PredictMPS")(pr.PredictMPS(sc, mps))
}

func TestTimesliceSoloMatchesLindley(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 20, 150, 30)
	pred := predictTS(t, &Scenario{Inference: inf, Load: 0.6, Requests: 5000, Seed: 3}, testParams)
	got, want := pred.Inference.LatencyMS, pred.Inference.SoloLatencyMS
	for _, k := range PercentileKeys {
		g, _ := got.Get(k)
		w, _ := want.Get(k)
		if math.Abs(g-w) > 1e-9*w {
			t.Errorf("%s: simulated solo %v, Lindley %v", k, g, w)
		}
	}
	if s := pred.Inference.ServiceMS.P99; math.Abs(s-3.6) > 1e-9 {
		t.Errorf("solo service p99 = %v ms, want 3.6", s)
	}
}

// With no training, the service is an M/D/1 queue: the mean time in system
// is S + ρS / (2(1−ρ)) (Pollaczek–Khinchine with deterministic service).
func TestTimesliceMD1MeanLatency(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 10, 400, 100) // S = 5 ms
	for _, load := range []float64{0.3, 0.5, 0.7} {
		pred := predictTS(t, &Scenario{Inference: inf, Load: load, Requests: 200000, Seed: 11}, testParams)
		s := 5.0
		want := s + load*s/(2*(1-load))
		got := pred.Inference.LatencyMS.Mean
		if math.Abs(got-want)/want > 0.02 {
			t.Errorf("load %.1f: mean latency %.4f ms, M/D/1 gives %.4f ms (more than 2%% apart)", load, got, want)
		}
	}
}

// A single request against a trainer that never idles gets the GPU one slice
// at a time: before each of its k slices it waits at most the rest of the
// trainer's slice plus the switches, and at least a full trainer slice
// between two of its own.
func TestTimesliceSingleRequestWaitBound(t *testing.T) {
	t.Parallel()
	p := TimesliceParams{SliceUS: 1000, SwitchUS: 50, HoldoverUS: 200}
	inf := uniformProfile("inf", KindInference, 5, 700, 0) // 3.5 ms busy, 4 slices
	train := uniformProfile("train", KindTraining, 1, 10000, 0)
	busy, k := 3500.0, 4.0
	upper := busy + k*(p.SliceUS+p.SwitchUS) + (k-1)*p.SwitchUS
	lower := busy + (k-1)*(p.SliceUS+2*p.SwitchUS)
	for seed := uint64(1); seed <= 50; seed++ {
		pred := predictTS(t, &Scenario{Inference: inf, Training: []*Profile{train}, RateRPS: 100, Requests: 1, Seed: seed}, p)
		got := pred.Inference.LatencyMS.Mean * 1000
		if got > upper+1e-6 || got < lower-1e-6 {
			t.Fatalf("seed %d: latency %.1f µs outside [%.1f, %.1f]", seed, got, lower, upper)
		}
	}
}

func TestTimesliceMonotoneInTrainingLoad(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 20, 150, 20)
	prev := 0.0
	// Same busy time per iteration, shrinking host gaps: more GPU pressure.
	for _, gap := range []float64{5000, 2000, 800, 300, 100, 0} {
		train := uniformProfile("train", KindTraining, 50, 200, gap)
		pred := predictTS(t, &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.4, Requests: 3000, Seed: 5}, testParams)
		got := pred.Inference.LatencyMS.Mean
		if got < prev {
			t.Errorf("training gap %v µs: mean latency %.4f ms fell below %.4f ms at a lighter load", gap, got, prev)
		}
		prev = got
	}
	// More trainers: more waiting.
	prev = 0
	train := uniformProfile("train", KindTraining, 50, 200, 50)
	for n := 0; n <= 3; n++ {
		var ts []*Profile
		for range n {
			ts = append(ts, train)
		}
		pred := predictTS(t, &Scenario{Inference: inf, Training: ts, Load: 0.4, Requests: 3000, Seed: 5}, testParams)
		if got := pred.Inference.LatencyMS.P99; got <= prev {
			t.Errorf("%d trainers: p99 %.4f ms not above %.4f ms with one fewer", n, got, prev)
		} else {
			prev = got
		}
	}
}

// A request shorter than the slice waits, on average, longer for the trainer
// as the slice grows. (A request longer than the slice can gain from a longer
// slice, since it needs fewer turns: that is the model working, not a bug.
// At high load the same holds for the tail, since a burst of queued requests
// fits in one longer slice; so the tail is checked at a light load.)
func TestTimesliceMonotoneInSlice(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 5, 40, 10) // 250 µs

	train := uniformProfile("train", KindTraining, 100, 300, 10)
	prevMean, prevP99 := 0.0, 0.0
	for _, slice := range []float64{500, 1000, 2000, 4000, 8000} {
		p := testParams
		p.SliceUS = slice
		pred := predictTS(t, &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.1, Requests: 3000, Seed: 9}, p)
		lat := pred.Inference.LatencyMS
		if lat.Mean < prevMean || lat.P99 < prevP99 {
			t.Errorf("slice %v µs: mean %.4f p99 %.4f ms, below %.4f / %.4f at a shorter slice", slice, lat.Mean, lat.P99, prevMean, prevP99)
		}
		prevMean, prevP99 = lat.Mean, lat.P99
	}
}

// An inference context whose host gaps are shorter than the hold-over keeps
// the GPU through them; with a shorter hold-over it yields at every gap and
// its requests take far longer. The slice (8 ms) outlasts a request (5 ms), so
// only the hold-over decides.
func TestTimesliceHoldover(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 10, 200, 300)
	train := uniformProfile("train", KindTraining, 1, 50000, 0)
	sc := &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.2, Requests: 2000, Seed: 2}
	long := TimesliceParams{SliceUS: 8000, SwitchUS: 50, HoldoverUS: 500}
	short := long
	short.HoldoverUS = 100
	pl := predictTS(t, sc, long)
	ps := predictTS(t, sc, short)
	// Long hold-over: one wait at most (a trainer slice and the switches out and back in), then solo.
	if got, limit := pl.Inference.ServiceMS.P99, 5.0+8.1; got > limit+1e-9 {
		t.Errorf("hold-over 500 µs: max service %.3f ms, want ≤ %.3f (solo + one trainer slice and two switches)", got, limit)
	}
	// Short hold-over: yields at each of the 9 inner gaps for a trainer slice.
	if got, floor := ps.Inference.ServiceMS.Mean, 5.0+9*(8.0+0.1); got < floor {
		t.Errorf("hold-over 100 µs: mean service %.3f ms, want ≥ %.3f (a trainer slice per gap)", got, floor)
	}
}

func TestTimesliceTrainingSlowdown(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 10, 100, 0) // 1 ms
	train := uniformProfile("train", KindTraining, 100, 500, 0)
	light := predictTS(t, &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.05, Requests: 2000, Seed: 1}, testParams)
	heavy := predictTS(t, &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.5, Requests: 2000, Seed: 1}, testParams)
	l, h := light.Training[0], heavy.Training[0]
	if *l.SoloIterationMS != 50 {
		t.Fatalf("solo iteration %v ms, want 50", *l.SoloIterationMS)
	}
	// The trainer loses at least the GPU time inference uses.
	if l.Slowdown < 1.05 || h.Slowdown < 1.5 || h.Slowdown <= l.Slowdown {
		t.Errorf("slowdowns light %.3f heavy %.3f: want > 1.05, > 1.5 and increasing", l.Slowdown, h.Slowdown)
	}
	if got, want := *h.IterationMS, 50*h.Slowdown; math.Abs(got-want) > 1e-9 {
		t.Errorf("iteration %v ms, want solo × slowdown = %v", got, want)
	}
}

func TestTimesliceDeterministic(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 20, 150, 20)
	train := uniformProfile("train", KindTraining, 100, 300, 10)
	sc := &Scenario{Inference: inf, Training: []*Profile{train}, Load: 0.5, Requests: 1000, Seed: 42}
	a := predictTS(t, sc, testParams)
	var pr Predictor // a reused predictor must give the same answer
	pr.PredictTimeslice(&Scenario{Inference: inf, Load: 0.2, Requests: 10, Seed: 1}, testParams)
	b, err := pr.PredictTimeslice(sc, testParams)
	if err != nil {
		t.Fatal(err)
	}
	if a.Inference != b.Inference || *a.Training[0].IterationMS != *b.Training[0].IterationMS {
		t.Errorf("same seed, different results:\n%+v\n%+v", a.Inference, b.Inference)
	}
	sc.Seed = 43
	c := predictTS(t, sc, testParams)
	if c.Inference.LatencyMS == a.Inference.LatencyMS {
		t.Errorf("seeds 42 and 43 gave identical latencies %+v", c.Inference.LatencyMS)
	}
}

func TestTimesliceSummaryStreamTrainer(t *testing.T) {
	t.Parallel()
	inf := &Profile{Format: ProfileFormat, Name: "inf", Kind: KindInference, Summary: &Summary{LatencyMS: 4, GPUUtil: 0.8, MemUtil: 0.2}}
	stream := &Profile{Format: ProfileFormat, Name: "stream", Kind: KindTraining, Summary: &Summary{GPUUtil: 0.9, MemUtil: 0.3}}
	pred := predictTS(t, &Scenario{Inference: inf, Training: []*Profile{stream}, Load: 0.3, Requests: 500, Seed: 1}, testParams)
	tp := pred.Training[0]
	if tp.IterationMS != nil || tp.SoloIterationMS != nil {
		t.Errorf("stream trainer reported iteration times %v / %v, want null", tp.IterationMS, tp.SoloIterationMS)
	}
	if !(tp.Slowdown > 1) {
		t.Errorf("stream trainer slowdown %v, want > 1", tp.Slowdown)
	}
	if got := pred.Inference.SoloServiceMS.Mean; math.Abs(got-4) > 1e-9 {
		t.Errorf("summary inference solo service %v ms, want 4", got)
	}
}

func TestTimesliceErrors(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 2, 100, 0)
	train := uniformProfile("train", KindTraining, 2, 100, 0)
	tests := []struct {
		name   string
		sc     Scenario
		p      TimesliceParams
		fields []string
	}{
		{"no rate", Scenario{Inference: inf}, testParams, []string{"rate"}},
		{"both", Scenario{Inference: inf, RateRPS: 10, Load: 0.5}, testParams, []string{"rate"}},
		{"load 1", Scenario{Inference: inf, Load: 1}, testParams, []string{"load"}},
		{"swapped kinds", Scenario{Inference: train, Training: []*Profile{inf}, RateRPS: 5}, testParams, []string{"inference.kind", "training[0].kind"}},
		{"bad params", Scenario{Inference: inf, RateRPS: 5}, TimesliceParams{SliceUS: 0, SwitchUS: -1, HoldoverUS: math.NaN()},
			[]string{"timeslice.slice_us", "timeslice.switch_us", "timeslice.holdover_us"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pr Predictor
			_, err := pr.PredictTimeslice(&tt.sc, tt.p)
			fieldtest.WantPaths(t, err, tt.fields...)
		})
	}
}

// FuzzTimeslice drives the simulation with arbitrary workloads and device
// parameters: it must end, and its answers must make sense.
func FuzzTimeslice(f *testing.F) {
	f.Add(100.0, 10.0, 300.0, 20.0, 1000.0, 50.0, 200.0, 0.5, uint8(2))
	f.Add(0.001, 0.0, 1e6, 0.0, 10.0, 0.0, 0.0, 0.9, uint8(0))
	f.Add(5000.0, 3000.0, 1.0, 1e5, 1e5, 1e4, 4e4, 0.05, uint8(3))
	f.Fuzz(func(t *testing.T, infDur, infGap, trDur, trGap, slice, sw, hold, load float64, trainers uint8) {
		clamp := func(v, lo, hi float64) float64 {
			if math.IsNaN(v) {
				return lo
			}
			return math.Min(hi, math.Max(lo, math.Abs(v)))
		}
		inf := uniformProfile("inf", KindInference, 3, clamp(infDur, 0.5, 1e5), clamp(infGap, 0, 1e5))
		var ts []*Profile
		for range trainers % 4 {
			ts = append(ts, uniformProfile("tr", KindTraining, 2, clamp(trDur, 0.5, 1e5), clamp(trGap, 0, 1e5)))
		}
		p := TimesliceParams{SliceUS: clamp(slice, 1, 1e5), SwitchUS: clamp(sw, 0, 1e4), HoldoverUS: clamp(hold, 0, 1e5)}
		if len(ts) > 0 && p.SliceUS < 20 {
			p.SliceUS = 20 // a 1 µs slice against 1e5 µs kernels is millions of events: valid, but too slow to fuzz
		}
		sc := &Scenario{Inference: inf, Training: ts, Load: clamp(load, 0.01, 0.95), Requests: 50, Seed: 1}
		var pr Predictor
		pred, err := pr.PredictTimeslice(sc, p)
		if err != nil {
			t.Fatal(err)
		}
		assertConsistent(t, pred)
	})
}

// assertConsistent checks what any prediction must satisfy: service no
// faster than solo, latency no shorter than service, p99 ≥ p50, and no
// trainer faster than alone.
func assertConsistent(t *testing.T, pred *Prediction) {
	t.Helper()
	lat, svc, solo := pred.Inference.LatencyMS, pred.Inference.ServiceMS, pred.Inference.SoloServiceMS
	const eps = 1e-9
	if svc.P50 < solo.P50*(1-eps)-eps || lat.Mean < svc.Mean*(1-eps)-eps || lat.P99 < lat.P50-eps {
		t.Fatalf("inconsistent: latency %+v service %+v solo service %v", lat, svc, solo.P50)
	}
	for _, tr := range pred.Training {
		if !(tr.Slowdown >= 1-eps) || math.IsInf(tr.Slowdown, 0) {
			t.Fatalf("trainer: slowdown %v, want a finite value ≥ 1", tr.Slowdown)
		}
	}
}

// Inputs that are valid but would keep the simulation running for minutes
// stop at the event budget with a clear error instead.
func TestSimulationEventBudget(t *testing.T) {
	// Not parallel: it lowers the package's maxEvents.
	defer func(old int) { maxEvents = old }(maxEvents)
	maxEvents = 100_000
	inf := uniformProfile("inf", KindInference, 2, 100, 0)
	train := uniformProfile("train", KindTraining, 1, 2, 0) // 2 µs kernels
	sc := &Scenario{Inference: inf, Training: []*Profile{train}, RateRPS: MinRateRPS, Requests: 10, Seed: 1}
	var pr Predictor
	if _, err := pr.PredictTimeslice(sc, testParams); !errors.Is(err, ErrTooManyEvents) {
		t.Errorf("timeslice: err = %v, want ErrTooManyEvents", err)
	}
	// Under MPS a trainer alone skips whole iterations; the events pile up
	// while a long request shares the GPU with 2 µs kernels.
	long := &Scenario{Inference: uniformProfile("long", KindInference, 1, 1e6, 0), Training: []*Profile{train}, RateRPS: 1, Requests: 10, Seed: 1}
	if _, err := pr.PredictMPS(long, MPSParams{}); !errors.Is(err, ErrTooManyEvents) {
		t.Errorf("mps: err = %v, want ErrTooManyEvents", err)
	}
	sc.RateRPS = 1e-4
	if _, err := pr.PredictTimeslice(sc, testParams); err == nil || !strings.Contains(err.Error(), "rate: want a rate in [0.001, 1e9] req/s") {
		t.Errorf("rate below the minimum: err = %v", err)
	}
}

// A trainer still in the host gap before its first kernel when the run ends
// has made progress through that gap: no infinite slowdown, and the
// prediction encodes as JSON.
func TestTrainerInLongGapHasFiniteSlowdown(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 2, 100, 0)
	train := uniformProfile("train", KindTraining, 1, 100, 5e6)
	pred := predictTS(t, &Scenario{Inference: inf, Training: []*Profile{train}, RateRPS: 100, Requests: 100, Seed: 1}, testParams)
	if s := pred.Training[0].Slowdown; !(s > 0 && s < 1.01) {
		t.Errorf("slowdown %v, want about 1 (the trainer was only ever in its gap)", s)
	}
	if _, err := json.Marshal(pred); err != nil {
		t.Errorf("prediction does not encode: %v", err)
	}
}

// A scenario whose estimated events are over its budget is refused before
// anything is simulated, in both modes, however long it would run; one
// within the budget is predicted, and its estimate is within a factor of
// ten of the events it simulated.
func TestEventBudgetRefusesBeforeSimulating(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 2, 100, 0)
	hostile := uniformProfile("hostile", KindTraining, 2, 0.5, 0) // half-microsecond kernels
	sc := &Scenario{Inference: inf, Training: []*Profile{hostile}, RateRPS: 8, Requests: 2000, Seed: 1}
	if est := sc.EventEstimate(ModeTimeslice); est < MaxEvents {
		t.Fatalf("estimate %.3g, want above the budget %d", est, MaxEvents)
	}
	var pr Predictor
	if _, err := pr.PredictTimeslice(sc, testParams); !errors.Is(err, ErrTooManyEvents) || !strings.Contains(err.Error(), "estimated before simulating") {
		t.Errorf("timeslice: %v, want ErrTooManyEvents before simulating", err)
	}
	sc.TrainingPct = []float64{50}
	if _, err := pr.PredictMPS(sc, MPSParams{}); !errors.Is(err, ErrTooManyEvents) {
		t.Errorf("mps: %v, want ErrTooManyEvents", err)
	}
	ok := &Scenario{Inference: inf, Training: []*Profile{uniformProfile("t", KindTraining, 4, 500, 10)}, RateRPS: 50, Requests: 200, Seed: 1}
	pred, err := pr.PredictTimeslice(ok, testParams)
	if err != nil {
		t.Fatal(err)
	}
	if est, got := ok.EventEstimate(ModeTimeslice), float64(pred.Events); est > 10*got || got > 10*est {
		t.Errorf("estimate %.3g for %.3g simulated events: want within a factor of ten", est, got)
	}
	ok.MaxEvents = ok.EventEstimate(ModeTimeslice) / 2 // a tighter budget refuses it
	if _, err := pr.PredictTimeslice(ok, testParams); !errors.Is(err, ErrTooManyEvents) {
		t.Errorf("under a budget of half its estimate: %v, want ErrTooManyEvents", err)
	}
}

// A simulation whose caller stopped waiting (Scenario.Done closed) ends
// at its next check with ErrCanceled, in both modes, however much work was
// left; an open Done changes nothing of the prediction.
func TestSimulationCanceled(t *testing.T) {
	t.Parallel()
	inf := uniformProfile("inf", KindInference, 2, 100, 0)
	train := uniformProfile("train", KindTraining, 1, 2, 0) // 2 µs kernels: up to the event cap
	closed := make(chan struct{})
	close(closed)
	// A budget above the estimate, so that the simulation starts.
	sc := &Scenario{Inference: inf, Training: []*Profile{train}, RateRPS: MinRateRPS, Requests: 10, Seed: 1, Done: closed, MaxEvents: 1e12}
	var pr Predictor
	if _, err := pr.PredictTimeslice(sc, testParams); !errors.Is(err, ErrCanceled) {
		t.Errorf("timeslice: err = %v, want ErrCanceled", err)
	}
	mps := &Scenario{Inference: uniformProfile("long", KindInference, 1, 1e6, 0), Training: []*Profile{train}, RateRPS: 1, Requests: 10, Seed: 1, Done: closed, MaxEvents: 1e12}
	if _, err := pr.PredictMPS(mps, MPSParams{}); !errors.Is(err, ErrCanceled) {
		t.Errorf("mps: err = %v, want ErrCanceled", err)
	}
	// Canceled midway: the scenario would run to the 200 million event cap.
	stop := make(chan struct{})
	sc.Done = stop
	go func() { time.Sleep(20 * time.Millisecond); close(stop) }()
	if _, err := pr.PredictTimeslice(sc, testParams); !errors.Is(err, ErrCanceled) {
		t.Errorf("timeslice canceled midway: err = %v, want ErrCanceled", err)
	}
	// The predictor is reusable after a cancel, and an open Done is no
	// part of what is predicted.
	ok := &Scenario{Inference: inf, Training: []*Profile{uniformProfile("t", KindTraining, 4, 500, 10)}, RateRPS: 50, Requests: 200, Seed: 1}
	want, err := pr.PredictTimeslice(ok, testParams)
	if err != nil {
		t.Fatal(err)
	}
	ok.Done = make(chan struct{})
	got, err := pr.PredictTimeslice(ok, testParams)
	if err != nil || got.Inference.LatencyMS.P99 != want.Inference.LatencyMS.P99 {
		t.Errorf("with an open Done: p99 %v (%v), want %v", got.Inference.LatencyMS.P99, err, want.Inference.LatencyMS.P99)
	}
}
