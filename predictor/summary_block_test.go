package predictor

import (
	"math"
	"strings"
	"testing"
)

// A summary keeps the head-of-line figure of the profile it summarises:
// block_us is the kernel-time-weighted mean of occupancy × block time over
// the kernels that fill the GPU (over all, weighted by SMs, if none do), and
// the expansion's kernels run in blocks that long (none without it); a
// negative block_us is refused by name.
func TestSummaryBlockTime(t *testing.T) {
	t.Parallel()
	p := uniformProfile("t", KindTraining, 4, 100, 10)
	p.Ops[0].Waves, p.Ops[0].Occupancy = 2, 1   // 100 µs · 1 · 50 µs
	p.Ops[1].Waves, p.Ops[1].Occupancy = 1, 0.5 // 100 µs · 0.5 · 100 µs
	p.Ops[2].Waves, p.Ops[2].Occupancy = 4, 1   // 100 µs · 1 · 25 µs
	s := p.Summarize()                          // the fourth op has no waves: it adds only to the weights
	if want := (50 + 50 + 25) / 4.0; math.Abs(s.BlockUS-want) > 1e-9 {
		t.Fatalf("block_us %v, want %v", s.BlockUS, want)
	}
	sp := &Profile{Format: ProfileFormat, Name: "t-summary", Kind: KindTraining, Summary: &s}
	for _, op := range sp.Expanded() {
		if b := op.DurUS / op.Waves; math.Abs(b-min(op.DurUS, s.BlockUS)) > 1e-9 {
			t.Fatalf("expanded op of %v µs in %v waves: blocks of %v µs, want %v", op.DurUS, op.Waves, b, min(op.DurUS, s.BlockUS))
		}
	}
	// The blocks of kernels on few SMs are left out while some kernel
	// fills every SM: a co-runner starts beside them, on the SMs left free.
	mixed := uniformProfile("m", KindTraining, 4, 100, 10)
	mixed.Ops[0].Waves = 2                                                  // fills the GPU, blocks of 50 µs
	mixed.Ops[1].SM, mixed.Ops[1].DurUS, mixed.Ops[1].Waves = 0.01, 5000, 1 // one SM, one 5 ms block
	if got, want := mixed.Summarize().BlockUS, 100*50/300.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("one GPU-filling kernel in 50 µs blocks among three: block_us %v, want %v", got, want)
	}
	// With none filling the GPU, every kernel counts, weighted by its SMs.
	half := uniformProfile("h", KindTraining, 2, 100, 10)
	half.Ops[0].SM, half.Ops[0].Waves = 0.5, 2 // 100 µs · 0.5 · 50 µs
	half.Ops[1].SM, half.Ops[1].Waves = 0.25, 1
	if got, want := half.Summarize().BlockUS, (100*0.5*50+100*0.25*100)/(100*0.75); math.Abs(got-want) > 1e-9 {
		t.Errorf("no GPU-filling kernel: block_us %v, want %v", got, want)
	}
	none := uniformProfile("u", KindTraining, 4, 100, 10).Summarize()
	if none.BlockUS != 0 {
		t.Errorf("a profile without waves: block_us %v, want 0", none.BlockUS)
	}
	bad := &Profile{Format: ProfileFormat, Name: "b", Kind: KindTraining, Summary: &Summary{IterationMS: 10, GPUUtil: 0.5, BlockUS: -1}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "summary.block_us") {
		t.Errorf("block_us -1: %v, want an error naming summary.block_us", err)
	}
}

// full_sm_share splits the synthetic kernels: that fraction of them fill the
// GPU, the others share the rest of the SM activity, so that the mean SM
// share is still sm_util/gpu_util.
func TestSummaryFullSMShare(t *testing.T) {
	t.Parallel()
	p := uniformProfile("t", KindTraining, 8, 100, 10)
	for i := range p.Ops {
		if i%4 != 0 {
			p.Ops[i].SM = 0.1 // three in four kernels use a tenth of the GPU
		}
	}
	s := p.Summarize()
	if s.FullSMShare != 0.25 {
		t.Fatalf("full_sm_share %v, want 0.25", s.FullSMShare)
	}
	ops := (&Profile{Format: ProfileFormat, Name: "s", Kind: KindTraining, Summary: &s}).Expanded()
	var full int
	var mean float64
	for _, op := range ops {
		if op.SM == 1 {
			full++
		}
		mean += op.SM / float64(len(ops))
	}
	if want := s.SMUtil / s.GPUUtil; math.Abs(mean-want) > 1e-9 || full != len(ops)/4 {
		t.Errorf("%d of %d kernels fill the GPU, mean sm %v; want a quarter and %v", full, len(ops), mean, want)
	}
	// A few kernels: the mean still holds (the others take what the whole
	// ones leave), and a share above the SM activity, or without it, is refused.
	for _, n := range []float64{1, 3} {
		s := Summary{IterationMS: n * 0.1, GPUUtil: 1, SMUtil: 0.6, FullSMShare: 0.5, KernelUS: 100}
		var mean float64
		ops := (&Profile{Format: ProfileFormat, Name: "s", Kind: KindTraining, Summary: &s}).Expanded()
		for _, op := range ops {
			mean += op.SM / float64(len(ops))
		}
		if math.Abs(mean-0.6) > 1e-9 {
			t.Errorf("%d kernels: mean sm %v, want 0.6", len(ops), mean)
		}
	}
	for _, s := range []Summary{
		{IterationMS: 10, GPUUtil: 0.5, SMUtil: 0.4, FullSMShare: 1.5},
		{IterationMS: 10, GPUUtil: 0.5, SMUtil: 0.25, FullSMShare: 0.8},
		{IterationMS: 10, GPUUtil: 0.5, FullSMShare: 0.3},
	} {
		bad := &Profile{Format: ProfileFormat, Name: "b", Kind: KindTraining, Summary: &s}
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "summary.full_sm_share") {
			t.Errorf("%+v: %v, want an error naming summary.full_sm_share", s, err)
		}
	}
}
