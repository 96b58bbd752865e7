package predictor

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/colocd/colocd/internal/fieldtest"
)

// An H200's instances (SMs from NVIDIA's MIG user guide, bandwidth = memory
// slices / 8).
var (
	h200_1g = Instance{Name: "1g.18gb", SMs: 16, GPUSMs: 132, Bandwidth: 1.0 / 8}
	h200_3g = Instance{Name: "3g.71gb", SMs: 60, GPUSMs: 132, Bandwidth: 4.0 / 8}
	h200_7g = Instance{Name: "7g.141gb", SMs: 132, GPUSMs: 132, Bandwidth: 1}
)

func f(v float64) *float64 { return &v }

// Each kernel's figures on an instance, worked by hand from the rule in
// Instance.Ops.
func TestInstanceOps(t *testing.T) {
	t.Parallel()
	p := &Profile{Format: ProfileFormat, Name: "p", Kind: KindTraining, Device: Device{Name: "NVIDIA H200", SMs: 132}, Ops: []Op{
		// Fills the GPU, little memory: SM-bound, speed 60/132.
		{Name: "gemm", DurUS: 132, GapUS: 7, SM: 1, Occupancy: 0.5, DRAM: f(0.1), L2: f(0.2), Waves: 3},
		// A fifth of the SMs (26.4 < 60): no SM loss, but it needs 0.9 of
		// the GPU's bandwidth and has 0.5: speed 0.5/0.9.
		{Name: "copy", DurUS: 90, GapUS: 1, SM: 0.2, Occupancy: 1, DRAM: f(0.9), L2: f(0.3)},
		// Half the SMs (66 > 60) and half the bandwidth: SMs cut it to
		// 60/66, at which it needs 0.6·60/66 = 0.545 > 0.5: 0.5/0.6.
		{Name: "mixed", DurUS: 100, SM: 0.5, Occupancy: 1, DRAM: f(0.6), L2: f(0.6)},
	}}
	got := h200_3g.Ops(p)
	want := []Op{
		{Name: "gemm", DurUS: 132 * 132 / 60.0, GapUS: 7, SM: 1, Occupancy: 0.5, DRAM: f(0.1 * 60 / 132 / 0.5), L2: f(0.2 * 60 / 132 / 0.5), Waves: 3 * 132 / 60.0},
		{Name: "copy", DurUS: 90 * 0.9 / 0.5, GapUS: 1, SM: 0.2 * 132 / 60, Occupancy: 1, DRAM: f(1), L2: f(0.3 / 0.9)},
		{Name: "mixed", DurUS: 100 / (0.5 / 0.6), SM: 1, Occupancy: 1, DRAM: f(1), L2: f(1)},
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) })); d != "" {
		t.Errorf("ops on %s (-want +got):\n%s", h200_3g.Name, d)
	}
	// The profile itself is untouched.
	if p.Ops[0].DurUS != 132 || *p.Ops[1].DRAM != 0.9 {
		t.Errorf("the profile changed: %+v", p.Ops[:2])
	}
}

// A profile taken on the instance itself, or on the whole GPU run on a 7g
// instance, predicts exactly as it does without the instance.
func TestInstanceWholeGPUChangesNothing(t *testing.T) {
	t.Parallel()
	inf := mpsProfile("inf", KindInference, 20, 150, 30, 0.8, 0.4, 0.3)
	train := mpsProfile("train", KindTraining, 30, 200, 20, 0.9, 0.5, 0.4)
	base := Scenario{Inference: inf, Training: []*Profile{train}, RateRPS: 400, Requests: 500, Seed: 3, TrainingPct: []float64{50}, DeviceSMs: 132}
	params := MPSParams{DRAM: 0.5, L2: 0.2, Kernels: 0.1}
	want := predictMPS(t, &base, params)

	onInstance := base
	onInstance.Instance = &h200_7g
	if d := cmp.Diff(want, predictMPS(t, &onInstance, params)); d != "" {
		t.Errorf("on %s (-whole GPU +instance):\n%s", h200_7g.Name, d)
	}

	// Profiles taken on a 60-SM device, predicted on a 60-SM instance.
	inf60, train60 := *inf, *train
	inf60.Device.SMs, train60.Device.SMs = 60, 60
	small := base
	small.Inference, small.Training, small.DeviceSMs = &inf60, []*Profile{&train60}, 60
	want = predictMPS(t, &small, params)
	small.Instance, small.DeviceSMs = &h200_3g, 0
	if d := cmp.Diff(want, predictMPS(t, &small, params)); d != "" {
		t.Errorf("profiled on the instance (-as is +on the instance):\n%s", d)
	}
}

// A smaller instance is never faster, and a 7g instance is the whole GPU.
func TestInstanceSpeedFallsWithSize(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../testdata/profiles/summary-train.json", "../testdata/profiles/summary-bert.json"} {
		p, err := LoadProfile(path)
		if err != nil {
			t.Fatal(err)
		}
		prev := 0.0
		for _, in := range []Instance{h200_1g, {Name: "2g.35gb", SMs: 32, GPUSMs: 132, Bandwidth: 2.0 / 8}, h200_3g, {Name: "4g.71gb", SMs: 64, GPUSMs: 132, Bandwidth: 4.0 / 8}, h200_7g} {
			s := in.Speed(p)
			if !(s > prev && s <= 1) {
				t.Errorf("%s on %s: speed %v after %v", p.Name, in.Name, s, prev)
			}
			prev = s
		}
		if prev != 1 {
			t.Errorf("%s on the whole GPU: speed %v, want 1", p.Name, prev)
		}
	}
}

// On an instance the solo figures are the instance's: a lone service's
// latency is its FIFO queue over the scaled unit, and a trainer alone
// keeps all of its (instance) speed.
func TestInstanceSoloFigures(t *testing.T) {
	t.Parallel()
	inf, err := LoadProfile("../testdata/profiles/summary-bert.json")
	if err != nil {
		t.Fatal(err)
	}
	whole := predictMPS(t, &Scenario{Inference: inf, RateRPS: 20, Requests: 400, Seed: 1}, MPSParams{})
	on := predictMPS(t, &Scenario{Inference: inf, RateRPS: 20, Requests: 400, Seed: 1, Instance: &h200_3g}, MPSParams{})
	want := inf.SoloUS() / h200_3g.Speed(inf) / 1000
	if got := on.Inference.SoloServiceMS.P99; math.Abs(got-want) > 1e-9 {
		t.Errorf("solo service on %s: %v ms, want %v", h200_3g.Name, got, want)
	}
	if on.Inference.LatencyMS.P99 <= whole.Inference.LatencyMS.P99 {
		t.Errorf("p99 on %s %v ms, not above the whole GPU's %v", h200_3g.Name, on.Inference.LatencyMS.P99, whole.Inference.LatencyMS.P99)
	}
	if on.MPS.SMs != 60 {
		t.Errorf("percentages round to %d SMs, want the instance's 60", on.MPS.SMs)
	}
}

func TestInstanceErrors(t *testing.T) {
	t.Parallel()
	inf := mpsProfile("inf", KindInference, 1, 100, 0, 1, 0, 0)
	for _, tt := range []struct {
		name string
		in   Instance
		want string
	}{
		{"no SMs", Instance{GPUSMs: 132, Bandwidth: 1}, "instance.sms: want an SM count in [1, 10000], got 0"},
		{"GPU smaller", Instance{SMs: 60, GPUSMs: 16, Bandwidth: 0.5}, "instance.gpu_sms"},
		{"bandwidth", Instance{SMs: 60, GPUSMs: 132, Bandwidth: 1.5}, "instance.bandwidth: want a share of the GPU's memory bandwidth in (0,1], got 1.5"},
		{"NaN bandwidth", Instance{SMs: 60, GPUSMs: 132, Bandwidth: math.NaN()}, "instance.bandwidth"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var pr Predictor
			_, err := pr.PredictMPS(&Scenario{Inference: inf, RateRPS: 1, Instance: &tt.in}, MPSParams{})
			fieldtest.WantText(t, err, tt.want)
		})
	}
}

// An op whose intensities are estimated gets the estimate scaled like a
// measured one, and still counts as estimated.
func TestInstanceEstimatedOps(t *testing.T) {
	t.Parallel()
	p := &Profile{Format: ProfileFormat, Name: "p", Kind: KindInference, Device: Device{Name: "NVIDIA H200", SMs: 132},
		Ops: []Op{{Name: "vectorized_elementwise_kernel", DurUS: 100, SM: 1, Occupancy: 1}}}
	got := h200_3g.Ops(p)
	speed := 60.0 / 132
	if d, l := *got[0].DRAM, *got[0].L2; math.Abs(d-estMemoryDRAM*speed/0.5) > 1e-12 || math.Abs(l-estMemoryL2*speed/0.5) > 1e-12 {
		t.Errorf("dram %v, l2 %v: want the estimates %v, %v scaled by %v/0.5", d, l, estMemoryDRAM, estMemoryL2, speed)
	}
	pred := predictMPS(t, &Scenario{Inference: p, RateRPS: 10, Requests: 10, Seed: 1, Instance: &h200_3g}, MPSParams{})
	if pred.MPS.EstimatedOps != 1 {
		t.Errorf("estimated_ops %d on the instance, want 1", pred.MPS.EstimatedOps)
	}
}
