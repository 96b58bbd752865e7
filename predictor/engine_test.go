package predictor

import (
	"math"
	"strings"
	"testing"
)

// An engine's steps come in bursts of the configured mean size at one
// instant, at the configured step rate on average; a request service draws
// the arrivals it always has.
func TestEngineArrivals(t *testing.T) {
	t.Parallel()
	const n, rate, burst = 200_000, 500.0, 32.0
	got := make([]float64, n)
	poissonArrivals(got, rate, burst, 7)
	bursts := 1
	for i := 1; i < n; i++ {
		if got[i] < got[i-1] {
			t.Fatalf("arrival %d at %g before %g", i, got[i], got[i-1])
		}
		if got[i] != got[i-1] {
			bursts++
		}
	}
	if mean := float64(n) / float64(bursts); math.Abs(mean/burst-1) > 0.03 {
		t.Errorf("mean burst %.2f steps, want %g ± 3 %%", mean, burst)
	}
	if r := float64(n) / (got[n-1] / 1e6); math.Abs(r/rate-1) > 0.05 {
		t.Errorf("step rate %.1f/s, want %g ± 5 %%", r, rate)
	}
	// burst 0 and 1 are the request process, draw for draw.
	want := make([]float64, 1000)
	poissonArrivals(want, rate, 0, 7)
	one := make([]float64, 1000)
	poissonArrivals(one, rate, 1, 7)
	for i := range want {
		if one[i] != want[i] || (i > 0 && want[i] == want[i-1]) {
			t.Fatalf("request %d: burst 1 gives %g, burst 0 %g", i, one[i], want[i])
		}
	}
}

// Alone, an engine at load L is busy L of the time, each step takes its
// solo time (service_ms is the step latency) and the steps of a burst
// queue behind each other (latency_ms grows with the burst).
func TestEngineSolo(t *testing.T) {
	t.Parallel()
	step := uniformProfile("step", KindInference, 20, 400, 10) // 8.2 ms
	for _, mode := range []Mode{ModeTimeslice, ModeMPS} {
		t.Run(string(mode), func(t *testing.T) {
			sc := &Scenario{Inference: step, Load: 0.6, BurstSteps: 50, Requests: 20_000, Seed: 3}
			var pr Predictor
			in := predictIn(t, &pr, mode, sc, testParams, MPSParams{}).Inference
			if in.BurstSteps != 50 || math.Abs(in.Load-0.6) > 1e-9 {
				t.Errorf("burst %g load %g, want 50 and 0.6", in.BurstSteps, in.Load)
			}
			if s := in.ServiceMS; math.Abs(s.P99-8.2) > 1e-6 || math.Abs(s.Mean-8.2) > 1e-6 {
				t.Errorf("step latency mean %.4f p99 %.4f ms, want the solo 8.2 ms", s.Mean, s.P99)
			}
			if in.LatencyMS.P99 < 20*8.2 {
				t.Errorf("latency p99 %.1f ms: steps of a burst of 50 should queue far longer than 20 steps", in.LatencyMS.P99)
			}
			if in.SoloLatencyMS.P99 != in.LatencyMS.P99 {
				t.Errorf("solo latency p99 %.3f, co-located with nothing %.3f: want equal", in.SoloLatencyMS.P99, in.LatencyMS.P99)
			}
			busy := 20_000 * 8.2 / (pr.arrivals[0][20_000-1]/1000 + in.LatencyMS.Mean)
			if math.Abs(busy-0.6) > 0.05 {
				t.Errorf("busy fraction %.3f, want 0.6 ± 0.05", busy)
			}
		})
	}
}

// Steps of a burst run back to back, so under time slicing an engine whose
// step is shorter than the slice keeps the GPU for its slice and a trainer
// takes it only at slice ends: on average steps wait less than requests at
// the same load, and no step waits more than one trainer slice. The busier
// the engine, the slower the trainer.
func TestEngineStepsBackToBack(t *testing.T) {
	t.Parallel()
	step := uniformProfile("step", KindInference, 10, 45, 5) // 0.5 ms
	tr := uniformProfile("tr", KindTraining, 50, 300, 20)
	params := TimesliceParams{SliceUS: 4000, SwitchUS: 50, HoldoverUS: 200}
	run := func(load, burst float64) *Prediction {
		return predictTS(t, &Scenario{Inference: step, Training: []*Profile{tr}, Load: load, BurstSteps: burst, Requests: 6000, Seed: 5}, params)
	}
	engine, requests := run(0.3, 64), run(0.3, 0)
	e, r := engine.Inference.ServiceMS, requests.Inference.ServiceMS
	if !(e.Mean < 0.9*r.Mean) {
		t.Errorf("mean step %.3f ms, mean request %.3f ms: want steps of bursts to wait less", e.Mean, r.Mean)
	}
	if most := 0.5 + 4 + 2*0.05; !(e.P99 > 4 && e.P99 <= most+1e-9) {
		t.Errorf("step p99 %.3f ms: want one trainer slice's wait at most (%.2f ms), and some steps to wait it", e.P99, most)
	}
	busier := run(0.7, 64)
	if a, b := engine.Training[0].Slowdown, busier.Training[0].Slowdown; !(b > a+0.2) {
		t.Errorf("trainer slowdown %.3f with the engine busy 0.3 of the time, %.3f at 0.7: want it to grow", a, b)
	}
}

func TestEngineBurstValidated(t *testing.T) {
	t.Parallel()
	step := uniformProfile("step", KindInference, 2, 100, 5)
	for _, b := range []float64{-1, 0.5, math.NaN(), math.Inf(1), 1e6, 201} { // 201: above 2,000 steps / 10
		sc := &Scenario{Inference: step, Load: 0.5, BurstSteps: b}
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "burst_steps") {
			t.Errorf("burst %g: err %v, want one naming burst_steps", b, err)
		}
		sc = &Scenario{Inference: step, Load: 0.5, Others: []OtherService{{Profile: step, Load: 0.2, BurstSteps: b}}}
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "others[0].burst_steps") {
			t.Errorf("other's burst %g: err %v, want one naming others[0].burst_steps", b, err)
		}
	}
}

// A real engine step (vLLM's decode step of a public trace) next to a real
// training step: alone each step takes its profile's time; under MPS the
// step p99 grows with the trainer's percentage, and time slicing about
// doubles it (the engine, busy back to back, gets every other slice).
func TestEngineRealStep(t *testing.T) {
	t.Parallel()
	step, err := LoadProfile("../testdata/profiles/mi300x-vllm-decode-step.json")
	if err != nil {
		t.Fatal(err)
	}
	_, tr := benchProfiles(t)
	sc := func(pct float64) *Scenario {
		return &Scenario{Inference: step, Training: []*Profile{tr}, TrainingPct: []float64{pct}, Load: 0.5, BurstSteps: 128, Requests: 2000, Seed: 1}
	}
	var pr Predictor
	last := 0.0
	for _, pct := range []float64{10, 25, 50, 75, 100} {
		pred, err := pr.PredictMPS(sc(pct), MPSParams{})
		if err != nil {
			t.Fatal(err)
		}
		in := pred.Inference
		if math.Abs(in.SoloServiceMS.P99-step.SoloUS()/1000) > 1e-9 {
			t.Errorf("solo step %.3f ms, want the profile's %.3f ms", in.SoloServiceMS.P99, step.SoloUS()/1000)
		}
		t.Logf("mps %3g %%: step p99 %.2f ms (solo %.2f ms), trainer ×%.2f", pct, in.ServiceMS.P99, in.SoloServiceMS.P99, pred.Training[0].Slowdown)
		if !(in.ServiceMS.P99 > last) {
			t.Errorf("step p99 %.3f ms at %g %%, %.3f ms one step lower: want it to grow", in.ServiceMS.P99, pct, last)
		}
		last = in.ServiceMS.P99
	}
	ts := sc(0)
	ts.TrainingPct = nil
	pred, err := pr.PredictTimeslice(ts, TimesliceParams{SliceUS: 1024, SwitchUS: 60, HoldoverUS: 500})
	if err != nil {
		t.Fatal(err)
	}
	in := pred.Inference
	t.Logf("timeslice: step p99 %.2f ms, trainer ×%.2f", in.ServiceMS.P99, pred.Training[0].Slowdown)
	if r := in.ServiceMS.P50 / in.SoloServiceMS.P50; !(r > 1.7 && r < 2.5) {
		t.Errorf("time-sliced step p50 %.2f× solo, want about 2×", r)
	}
}
