package llm

import (
	"math"
	"testing"
	"time"
)

// tiny is a small engine whose step times are easy to compute by hand:
// 1e9 parameters of one byte (1 GB of weights read per step: 1 ms at
// 1 TB/s), 2 layers of width 64, 1000 bytes of KV a token; 1e15 FLOP/s at
// MFU 1 (a token's 2e9 FLOPs: 2 µs); a 1 ms fixed cost; 64 tokens a step,
// 4 requests, 64 blocks of 16 tokens; no noise.
func tiny() Config {
	return Config{
		Model:    ModelSpec{Params: 1e9, Layers: 2, Hidden: 64, BytesPerParam: 1, KVBytesPerToken: 1000},
		Hardware: Hardware{MemoryBytes: 1e10, Bandwidth: 1e12, PeakFLOPS: 1e15, MFU: 1, FixedMS: 1},
		Scheduler: Scheduler{MaxNumBatchedTokens: 64, MaxNumSeqs: 4, MaxModelLen: 256, BlockSize: 16,
			KVBlocks: 64},
		Interference:        Interference{MinSMShare: 0.5, LaunchesPerLayer: 4, MaxKernelMS: 5},
		ModelName:           "tiny",
		Start:               time.Unix(1_700_000_000, 0),
		DefaultPromptTokens: 32,
		DefaultOutputTokens: 4,
	}
}

// handMS is the solo law written out: FixedMS + max(compute, memory).
func handMS(c *Config, tokens int, kv, pairs float64) float64 {
	compute := (2*c.Model.Params*float64(tokens) + 4*float64(c.Model.Layers)*float64(c.Model.Hidden)*pairs) /
		(c.Hardware.PeakFLOPS * c.Hardware.MFU) * 1000
	memory := (c.Model.Params*c.Model.BytesPerParam + c.Model.KVBytesPerToken*kv) / c.Hardware.Bandwidth * 1000
	return c.Hardware.FixedMS + math.Max(compute, memory)
}

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestStepCostSolo(t *testing.T) {
	t.Parallel()
	c := tiny()
	tests := []struct {
		name string
		step Step
		want float64
	}{
		// One decode at 100 tokens of context: 1 ms of weights + 0.1 µs of
		// KV against 2 µs of compute: memory-bound.
		{"decode", Step{Tokens: 1, KVTokens: 101, AttnPairs: 101}, 1 + 1 + 101*1000/1e12*1000},
		// A 4096-token prefill: 8.19e12 FLOPs (8.2 ms) + attention.
		{"prefill", Step{Tokens: 4096, KVTokens: 4096, AttnPairs: 4096 * 4097 / 2},
			1 + (2*1e9*4096+4*2*64*float64(4096*4097/2))/1e15*1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := c.StepCost(tt.step, nil)
			if !near(got.TotalMS, tt.want, 1e-12) || got.HOLMS != 0 {
				t.Errorf("StepCost = %+v, want total %g ms and no wait", got, tt.want)
			}
			if h := handMS(&c, tt.step.Tokens, tt.step.KVTokens, tt.step.AttnPairs); !near(got.TotalMS, h, 1e-12) {
				t.Errorf("StepCost = %g, the law by hand %g", got.TotalMS, h)
			}
		})
	}
}

// A trainer at Pct 0, or none, changes nothing; a higher percentage never
// makes a step faster, and any percentage above 0 makes it slower.
func TestTrainerPercentageSlowsSteps(t *testing.T) {
	t.Parallel()
	c := Default()
	steps := map[string]Step{
		"decode batch": {Tokens: 32, KVTokens: 32 * 1000, AttnPairs: 32 * 1000},
		"prefill":      {Tokens: 2048, KVTokens: 2048, AttnPairs: 2048 * 2049 / 2},
	}
	for name, s := range steps {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			solo := c.StepCost(s, nil).TotalMS
			if got := c.StepCost(s, []Trainer{{Pct: 0, Duty: 1, BandwidthFrac: 1, KernelMS: 2}}).TotalMS; got != solo {
				t.Errorf("a trainer at 0 %%: %g ms, want the solo %g", got, solo)
			}
			prev := solo
			for pct := 5; pct <= 100; pct += 5 {
				got := c.StepCost(s, []Trainer{{Pct: pct, Duty: 0.8, BandwidthFrac: 0.4, KernelMS: 0.3}}).TotalMS
				if got <= prev {
					t.Errorf("at %d %%: %g ms, want more than %g at %d %%", pct, got, prev, pct-5)
				}
				prev = got
			}
		})
	}
}

// At the same duty and percentage, a trainer of long kernels delays each
// launch more than one of short kernels, up to MaxKernelMS.
func TestLongKernelsHurtMore(t *testing.T) {
	t.Parallel()
	c := Default()
	s := Step{Tokens: 16, KVTokens: 16 * 500, AttnPairs: 16 * 500}
	cost := func(kernelMS float64) Cost {
		return c.StepCost(s, []Trainer{{Pct: 50, Duty: 0.6, BandwidthFrac: 0.2, KernelMS: kernelMS}})
	}
	short, long := cost(0.05), cost(1)
	if !(long.TotalMS > short.TotalMS) {
		t.Errorf("1 ms kernels: %g ms, 50 µs kernels: %g ms; want the long ones slower", long.TotalMS, short.TotalMS)
	}
	// Launches × Duty × Pct/100 × KernelMS/2 = 32·4 · 0.6 · 0.5 · 0.5.
	if want := 32 * 4 * 0.6 * 0.5 * 0.5; !near(long.HOLMS, want, 1e-12) {
		t.Errorf("1 ms kernels wait %g ms a step, want %g", long.HOLMS, want)
	}
	if capped, over := cost(c.Interference.MaxKernelMS), cost(10*c.Interference.MaxKernelMS); capped.HOLMS != over.HOLMS {
		t.Errorf("kernels past MaxKernelMS wait %g ms, want the cap's %g", over.HOLMS, capped.HOLMS)
	}
}

// Bandwidth is shared only when the engine's and the trainers' demands
// together exceed the peak.
func TestBandwidthSharingPastPeak(t *testing.T) {
	t.Parallel()
	c := tiny()
	c.Interference.LaunchesPerLayer = 0 // no head-of-line waits: the memory term alone
	// A decode step, memory-bound: 1 ms of memory against 2 µs of compute,
	// so the engine asks for the whole peak.
	decode := Step{Tokens: 1, KVTokens: 1, AttnPairs: 1}
	solo := c.StepCost(decode, nil)
	tests := []struct {
		name       string
		bandwidth  float64
		wantMemory float64
	}{
		{"no demand", 0, solo.MemoryMS},
		// 1 + 0.5 > 1: memory lengthens by 0.5·busy.
		{"half the peak", 0.5, solo.MemoryMS * 1.5},
	}
	for _, tt := range tests {
		got := c.StepCost(decode, []Trainer{{Pct: 10, Duty: 1, BandwidthFrac: tt.bandwidth}})
		if !near(got.MemoryMS, tt.wantMemory, 1e-12) {
			t.Errorf("%s: memory %g ms, want %g", tt.name, got.MemoryMS, tt.wantMemory)
		}
	}
	// A prefill of 4096 tokens, compute-bound (8.2 ms against 1 ms): the
	// engine asks for about an eighth of the peak.
	prefill := Step{Tokens: 4096, KVTokens: 4096, AttnPairs: 4096}
	p := c.StepCost(prefill, nil)
	under := c.StepCost(prefill, []Trainer{{Pct: 1, Duty: 1, BandwidthFrac: 0.8}})
	if under.MemoryMS != p.MemoryMS {
		t.Errorf("demand %.2f + 0.8 under the peak: memory %g ms, want it unchanged at %g", p.MemoryMS/p.ComputeMS, under.MemoryMS, p.MemoryMS)
	}
	over := c.StepCost(prefill, []Trainer{{Pct: 1, Duty: 1, BandwidthFrac: 1}})
	if !(over.MemoryMS > p.MemoryMS) {
		t.Errorf("demand past the peak: memory %g ms, want more than %g", over.MemoryMS, p.MemoryMS)
	}
}

// Several trainers add: two at 25 % hold the SMs one at 50 % does.
func TestTrainersAdd(t *testing.T) {
	t.Parallel()
	c := Default()
	s := Step{Tokens: 2048, KVTokens: 2048, AttnPairs: 2048 * 2049 / 2}
	tr := Trainer{Pct: 25, Duty: 0.5, BandwidthFrac: 0.1, KernelMS: 0.4}
	two := c.StepCost(s, []Trainer{tr, tr})
	tr.Pct = 50
	one := c.StepCost(s, []Trainer{tr})
	if !near(two.ComputeMS, one.ComputeMS, 1e-12) || !near(two.HOLMS, one.HOLMS, 1e-12) {
		t.Errorf("two at 25 %%: %+v; one at 50 %%: %+v; want the same compute and wait", two, one)
	}
}

func TestNoise(t *testing.T) {
	t.Parallel()
	if noise(0, 3) != 1 {
		t.Error("sigma 0 is not 1")
	}
	// Mean 1: the mean of exp(σz − σ²/2) over z ~ N(0,1).
	var sum float64
	const n = 2001
	for i := range n {
		z := (float64(i) - n/2) / (n / 8) // z from -4 to 4
		sum += noise(0.1, z) * math.Exp(-z*z/2) / math.Sqrt(2*math.Pi) * (8.0 / n)
	}
	if !near(sum, 1, 1e-3) {
		t.Errorf("mean factor %g, want 1", sum)
	}
}
