package predictor

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
)

// mpsProfile builds a profile of n identical ops with the given SM demand and
// memory intensities.
func mpsProfile(name string, kind Kind, n int, dur, gap, sm, dram, l2 float64) *Profile {
	p := uniformProfile(name, kind, n, dur, gap)
	for i := range p.Ops {
		d, l := dram, l2
		p.Ops[i].SM, p.Ops[i].DRAM, p.Ops[i].L2 = sm, &d, &l
	}
	p.Device = Device{Name: "NVIDIA H200", SMs: 132}
	return p
}

func predictMPS(t *testing.T, sc *Scenario, p MPSParams) *Prediction {
	t.Helper()
	var pr Predictor
	return mustPredict(t, "PredictMPS")(pr.PredictMPS(sc, p))
}

func TestMPSSoloIsExact(t *testing.T) {
	t.Parallel()
	inf := mpsProfile("inf", KindInference, 20, 150, 30, 0.8, 0.4, 0.3)
	pred := predictMPS(t, &Scenario{Inference: inf, Load: 0.6, Requests: 3000, Seed: 3}, MPSParams{DRAM: 1, L2: 1, Kernels: 1})
	for _, k := range PercentileKeys {
		got, _ := pred.Inference.LatencyMS.Get(k)
		want, _ := pred.Inference.SoloLatencyMS.Get(k)
		if math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: one context under MPS %v ms, solo queue %v ms", k, got, want)
		}
	}
	// The same arrivals under time slicing give the same solo figures.
	var pr Predictor
	ts, err := pr.PredictTimeslice(&Scenario{Inference: inf, Load: 0.6, Requests: 3000, Seed: 3}, *DefaultCalibration().Timeslice)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Inference.SoloLatencyMS != pred.Inference.SoloLatencyMS {
		t.Errorf("solo latency differs between models: %+v vs %+v", ts.Inference.SoloLatencyMS, pred.Inference.SoloLatencyMS)
	}
}

// A kernel that fills the GPU alone, capped at p % of 132 SMs, gets
// floor(p·1.32) SMs: it takes 132/floor(p·1.32) times as long.
func TestMPSCappedKernel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		pct  float64
		sms  float64
	}{{"50%", 50, 66}, {"33%", 33, 43}, {"10%", 10, 13}, {"0.5% is one SM", 0.5, 1}, {"100%", 100, 132}} {
		t.Run(tt.name, func(t *testing.T) {
			inf := mpsProfile("inf", KindInference, 1, 1000, 0, 1, 0, 0)
			pred := predictMPS(t, &Scenario{Inference: inf, RateRPS: 1, Requests: 20, Seed: 1, InferencePct: tt.pct}, MPSParams{})
			want := 1.0 * 132 / tt.sms
			if got := pred.Inference.ServiceMS.Mean; math.Abs(got-want) > 1e-9 {
				t.Errorf("service %v ms, want %v", got, want)
			}
			if got := pred.Inference.SoloServiceMS.Mean; math.Abs(got-want) > 1e-9 {
				t.Errorf("solo service at its own cap %v ms, want %v", got, want)
			}
		})
	}
}

func TestMPSSharing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		inf, train    *Profile
		infPct, trPct float64
		p             MPSParams
		wantService   float64 // ms, for a 1 ms (solo) request
	}{
		{"two compute-bound kernels at 50 % each run at half rate",
			mpsProfile("i", KindInference, 1, 1000, 0, 1, 0, 0), mpsProfile("t", KindTraining, 1, 5000, 0, 1, 0, 0), 50, 50, MPSParams{}, 2},
		{"two full kernels at 100 % split the SMs",
			mpsProfile("i", KindInference, 1, 1000, 0, 1, 0, 0), mpsProfile("t", KindTraining, 1, 5000, 0, 1, 0, 0), 100, 100, MPSParams{}, 2},
		{"small kernels that fit side by side do not slow down",
			mpsProfile("i", KindInference, 1, 1000, 0, 0.4, 0, 0), mpsProfile("t", KindTraining, 1, 5000, 0, 0.5, 0, 0), 100, 100, MPSParams{}, 1},
		{"proportional shrink: 1.0 and 0.25 of the SMs",
			mpsProfile("i", KindInference, 1, 1000, 0, 1, 0, 0), mpsProfile("t", KindTraining, 1, 5000, 0, 1, 0, 0), 100, 25, MPSParams{}, 1.25},
		{"DRAM: two kernels wanting 0.8 of the bandwidth each share it",
			mpsProfile("i", KindInference, 1, 1000, 0, 0.3, 0.8, 0), mpsProfile("t", KindTraining, 1, 5000, 0, 0.3, 0.8, 0), 100, 100, MPSParams{}, 1.6},
		{"stage 2: rate divided by 1 + β_dram · own DRAM · co-runner DRAM",
			mpsProfile("i", KindInference, 1, 1000, 0, 0.4, 0.5, 0), mpsProfile("t", KindTraining, 1, 5000, 0, 0.4, 0.3, 0), 100, 100, MPSParams{DRAM: 1}, 1.15},
		{"stage 2: L2 and co-runner SMs add up",
			mpsProfile("i", KindInference, 1, 1000, 0, 0.4, 0, 0.5), mpsProfile("t", KindTraining, 1, 5000, 0, 0.4, 0, 0.2), 100, 100, MPSParams{L2: 2, Kernels: 0.5}, 1 + 2*0.5*0.2 + 0.5*0.4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One request that arrives while the trainer's long kernel runs.
			sc := &Scenario{Inference: tt.inf, Training: []*Profile{tt.train}, RateRPS: 1000, Requests: 1, Seed: 1, InferencePct: tt.infPct, TrainingPct: []float64{tt.trPct}}
			pred := predictMPS(t, sc, tt.p)
			if got := pred.Inference.ServiceMS.Mean; math.Abs(got-tt.wantService) > 1e-9 {
				t.Errorf("service %v ms, want %v", got, tt.wantService)
			}
		})
	}
}

// The admission search binary-searches the training percentage: inference
// p99 must not rise as the percentage goes down.
func TestMPSMonotoneInTrainingPct(t *testing.T) {
	t.Parallel()
	inf, train := benchProfiles(t)
	gappy := mpsProfile("gappy", KindTraining, 50, 300, 400, 0.6, 0.5, 0.4)
	params := MPSParams{DRAM: 0.8, L2: 0.3, Kernels: 0.2}
	for _, tc := range []struct {
		name  string
		train *Profile
		load  float64
	}{{"v100 step, load 0.3", train, 0.3}, {"v100 step, load 0.6", train, 0.6}, {"gappy trainer, load 0.5", gappy, 0.5}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var pr Predictor
			prev := math.Inf(1)
			for pct := 100.0; pct >= 10; pct -= 5 {
				sc := &Scenario{Inference: inf, Training: []*Profile{tc.train}, Load: tc.load, Requests: 1000, Seed: 4, TrainingPct: []float64{pct}}
				pred, err := pr.PredictMPS(sc, params)
				if err != nil {
					t.Fatal(err)
				}
				got := pred.Inference.LatencyMS.P99
				if got > prev*(1+1e-9) {
					t.Errorf("training at %v %%: p99 %.4f ms above %.4f ms at %v %%", pct, got, prev, pct+5)
				}
				prev = got
			}
		})
	}
}

func TestMPSScenarioErrors(t *testing.T) {
	t.Parallel()
	inf := mpsProfile("inf", KindInference, 1, 100, 0, 1, 0, 0)
	tr := mpsProfile("t", KindTraining, 1, 100, 0, 1, 0, 0)
	tests := []struct {
		name string
		sc   Scenario
		p    MPSParams
		want string
	}{
		{"pct above 100", Scenario{Inference: inf, Training: []*Profile{tr}, RateRPS: 1, TrainingPct: []float64{120}}, MPSParams{}, "training_pct[0]: want an active-thread percentage in (0,100], got 120"},
		{"pct count", Scenario{Inference: inf, Training: []*Profile{tr}, RateRPS: 1, TrainingPct: []float64{10, 20}}, MPSParams{}, "training_pct: want one percentage for all training jobs or one per job (1), got 2 values"},
		{"inference pct", Scenario{Inference: inf, RateRPS: 1, InferencePct: -1}, MPSParams{}, "inference_pct"},
		{"negative coefficient", Scenario{Inference: inf, RateRPS: 1}, MPSParams{L2: -1}, "mps.coefficients.l2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pr Predictor
			_, err := pr.PredictMPS(&tt.sc, tt.p)
			fieldtest.WantText(t, err, tt.want)
		})
	}
}

// Skipping a lone trainer's whole iterations gives what stepping through
// their kernels gives (up to float rounding).
func TestMPSSkipAloneIterationsChangesNothing(t *testing.T) {
	// Not parallel: it switches the package's skipAloneIterations.
	inf := mpsProfile("inf", KindInference, 10, 300, 50, 0.8, 0.5, 0.4)
	train := mpsProfile("train", KindTraining, 20, 200, 30, 0.7, 0.6, 0.3)
	sc := &Scenario{Inference: inf, Training: []*Profile{train}, RateRPS: 5, Requests: 300, Seed: 2, TrainingPct: []float64{40}}
	params := MPSParams{DRAM: 0.5, L2: 0.2, Kernels: 0.1}
	skipped := predictMPS(t, sc, params)
	defer func() { skipAloneIterations = true }()
	skipAloneIterations = false
	stepped := predictMPS(t, sc, params)
	if stepped.Events <= skipped.Events {
		t.Fatalf("stepping took %d events, skipping %d: nothing was skipped", stepped.Events, skipped.Events)
	}
	assertSkipChangesNothing(t, skipped, stepped)

	// Real profiles: kernels of every length and gap, a request that ends
	// while the trainer is mid-iteration, kernels skipped within a unit.
	realInf, realTrain := benchProfiles(t)
	sc = &Scenario{Inference: realInf, Training: []*Profile{realTrain}, RateRPS: 8, Requests: 300, Seed: 1, TrainingPct: []float64{35}}
	skipAloneIterations = true
	skipped = predictMPS(t, sc, params)
	skipAloneIterations = false
	stepped = predictMPS(t, sc, params)
	assertSkipChangesNothing(t, skipped, stepped)

	// The inference server alone, its real kernels of every length: only
	// kernels within a request are skipped, and each still counts as an
	// event, so the counts agree exactly.
	sc = &Scenario{Inference: realInf, RateRPS: 8, Requests: 300, Seed: 1}
	skipAloneIterations = true
	skipped = predictMPS(t, sc, params)
	skipAloneIterations = false
	stepped = predictMPS(t, sc, params)
	if skipped.Events != stepped.Events {
		t.Errorf("inference alone: %d events skipping, %d stepping", skipped.Events, stepped.Events)
	}
	for _, k := range PercentileKeys {
		a, _ := skipped.Inference.LatencyMS.Get(k)
		b, _ := stepped.Inference.LatencyMS.Get(k)
		if math.Abs(a-b) > 1e-9*b {
			t.Errorf("inference alone, latency %s: skipping %v ms, stepping %v ms", k, a, b)
		}
	}
}

func assertSkipChangesNothing(t *testing.T, skipped, stepped *Prediction) {
	t.Helper()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }
	for _, k := range PercentileKeys {
		a, _ := skipped.Inference.LatencyMS.Get(k)
		b, _ := stepped.Inference.LatencyMS.Get(k)
		if !near(a, b) {
			t.Errorf("latency %s: skipping %v ms, stepping %v ms", k, a, b)
		}
	}
	if !near(skipped.Training[0].Slowdown, stepped.Training[0].Slowdown) {
		t.Errorf("slowdown: skipping %v, stepping %v", skipped.Training[0].Slowdown, stepped.Training[0].Slowdown)
	}
}

// The fluid simulation ends, with consistent figures, for any valid mix of
// kernel lengths, gaps, SM and memory demands, percentages and coefficients.
func FuzzMPS(f *testing.F) {
	f.Add(100.0, 10.0, 300.0, 20.0, 0.8, 0.5, 0.4, 50.0, 1.0, 0.5, uint8(2))
	f.Add(0.001, 0.0, 1e6, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.9, uint8(1))
	f.Add(5000.0, 3000.0, 1.0, 1e5, 0.01, 0.0, 0.9, 100.0, 1000.0, 0.05, uint8(3))
	f.Fuzz(func(t *testing.T, infDur, infGap, trDur, trGap, sm, dram, l2, pct, coef, load float64, trainers uint8) {
		clamp := func(v, lo, hi float64) float64 {
			if math.IsNaN(v) {
				return lo
			}
			return math.Min(hi, math.Max(lo, math.Abs(v)))
		}
		// Valid inputs can take minutes (1 µs kernels against a 1e5 µs
		// request); the budget refuses them cleanly, and sooner here.
		defer func(old int) { maxEvents = old }(maxEvents)
		maxEvents = 200_000
		frac := clamp(sm, 0.001, 1)
		// Kernels of different lengths and gaps (1×, 2×, 3×, …), so that
		// skipping a lone context's kernels is searched, not stepped.
		vary := func(p *Profile) *Profile {
			for i := range p.Ops {
				p.Ops[i].DurUS *= float64(1 + i%4)
				p.Ops[i].GapUS *= float64(1 + i%3)
			}
			return p
		}
		inf := vary(mpsProfile("inf", KindInference, 5, clamp(infDur, 0.5, 1e5), clamp(infGap, 0, 1e5), frac, clamp(dram, 0, 1), clamp(l2, 0, 1)))
		var ts []*Profile
		var pcts []float64
		for i := range int(trainers % 4) {
			ts = append(ts, vary(mpsProfile("tr", KindTraining, 6, clamp(trDur, 0.5, 1e5), clamp(trGap, 0, 1e5), 1-frac/2, clamp(l2, 0, 1), clamp(dram, 0, 1))))
			pcts = append(pcts, clamp(pct+float64(i)*10, 1, 100))
		}
		c := clamp(coef, 0, MaxCoefficient)
		sc := &Scenario{Inference: inf, Training: ts, TrainingPct: pcts, Load: clamp(load, 0.01, 0.95), Requests: 50, Seed: 1}
		var pr Predictor
		pred, err := pr.PredictMPS(sc, MPSParams{DRAM: c, L2: c / 2, Kernels: c / 10})
		if errors.Is(err, ErrTooManyEvents) {
			return // valid but too long: refused with a clear error, which is the contract
		}
		if err != nil {
			t.Fatal(err)
		}
		assertConsistent(t, pred)
	})
}

// runPair's own handling of a gap (pairGap) and of a head-of-line wait is
// the main loop's, bit for bit: the same predictions and event counts with
// it and without, on real profiles under several percentages, two trainers
// and several services, with and without waves.
func TestMPSPairGapsChangeNothing(t *testing.T) {
	// Not parallel: it switches the package's pairGaps.
	inf, train := benchProfiles(t)
	gappy := mpsProfile("gappy", KindTraining, 20, 200, 300, 0.7, 0.6, 0.3) // gaps longer than the hold
	params := MPSParams{DRAM: 0.5, L2: 0.25, Kernels: 0.1}
	// With waves: the real profiles' kernels in 1 to 4 rounds of blocks,
	// and a trainer of long one-wave kernels that fill the device.
	wavy := func(p *Profile) *Profile {
		q := *p
		q.Ops = slices.Clone(p.Ops)
		for i := range q.Ops {
			q.Ops[i].Waves = float64(1 + i%4)
			q.Ops[i].Occupancy = max(q.Ops[i].Occupancy, 0.25)
		}
		return &q
	}
	winf, wtrain := wavy(inf), wavy(train)
	long := uniformProfile("long", KindTraining, 20, 2000, 100)
	for i := range long.Ops {
		long.Ops[i].Waves, long.Ops[i].Occupancy = 1, 1
	}
	scenarios := []*Scenario{
		{Inference: winf, Training: []*Profile{wtrain}, RateRPS: 8, Requests: 300, Seed: 6, TrainingPct: []float64{35}},
		{Inference: winf, Training: []*Profile{wtrain}, Load: 0.6, Requests: 300, Seed: 7, TrainingPct: []float64{100}},
		{Inference: winf, Training: []*Profile{long}, Load: 0.3, Requests: 200, Seed: 8, TrainingPct: []float64{100}},
		{Inference: winf, Training: []*Profile{wtrain, gappy}, Load: 0.3, Requests: 200, Seed: 9, TrainingPct: []float64{50, 30}},
		{Inference: inf, Training: []*Profile{long}, Load: 0.4, Requests: 200, Seed: 10, TrainingPct: []float64{60}},
		{Inference: inf, Training: []*Profile{train}, RateRPS: 8, Requests: 300, Seed: 1, TrainingPct: []float64{35}},
		{Inference: inf, Training: []*Profile{train}, Load: 0.6, Requests: 300, Seed: 2, TrainingPct: []float64{100}},
		{Inference: inf, Training: []*Profile{gappy}, Load: 0.4, Requests: 300, Seed: 3, TrainingPct: []float64{60}},
		{Inference: inf, Training: []*Profile{train, gappy}, Load: 0.3, Requests: 200, Seed: 4, TrainingPct: []float64{50, 30}},
		{Inference: inf, Training: []*Profile{train}, Load: 0.3, Requests: 200, Seed: 5, BurstSteps: 8, TrainingPct: []float64{70}},
	}
	defer func() { pairGaps = true }()
	for i, sc := range scenarios {
		pairGaps = true
		fast := predictMPS(t, sc, params)
		pairGaps = false
		slow := predictMPS(t, sc, params)
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("scenario %d: runPair's gaps give %+v, the main loop's %+v", i, fast.Inference.LatencyMS, slow.Inference.LatencyMS)
		}
	}
}
