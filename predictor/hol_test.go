package predictor

import "testing"

// Head-of-line blocking under MPS: two trainers with the same utilisation,
// one of 0.1 ms kernels (one wave) and one of 5 ms kernels (ten waves of
// 0.5 ms blocks): at 100 % the long-kernel trainer gives the higher p99,
// as a new inference kernel waits for its blocks to retire; the difference
// shrinks as its percentage falls, and neither p99 rises as the
// percentage falls. Without waves the long kernels cost no wait (the fluid
// model). (On a 5 % grid the p99 of 2,000 requests next to ten 5 ms kernels
// jitters by a few per cent between neighbours, in the fluid model too; the
// steps here are larger than that.)
func TestHeadOfLineBlocking(t *testing.T) {
	t.Parallel()
	inf := gappyProfile("inf", KindInference, 4, 150, 30, 1)
	trainer := func(name string, dur float64, waves float64) *Profile {
		n := int(50000 / dur) // 50 ms of kernels per iteration
		p := uniformProfile(name, KindTraining, n, dur, dur/4)
		for i := range p.Ops {
			p.Ops[i].Waves = waves
		}
		return p
	}
	short, long := trainer("short", 100, 1), trainer("long", 5000, 10)
	var pr Predictor
	p99 := func(tr *Profile, pct float64) float64 {
		sc := &Scenario{Inference: inf, Training: []*Profile{tr}, TrainingPct: []float64{pct}, Load: 0.2, Requests: 2000, Seed: 1}
		p, err := pr.PredictMPS(sc, MPSParams{DRAM: 0.5, L2: 0.25, Kernels: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		return p.Inference.LatencyMS.P99
	}
	prevGap := 0.0
	prevShort, prevLong := 0.0, 0.0
	for i, pct := range []float64{100, 70, 40, 10} {
		s, l := p99(short, pct), p99(long, pct)
		t.Logf("at %3.0f %%: p99 %.3f ms next to 0.1 ms kernels, %.3f ms next to 5 ms kernels", pct, s, l)
		if i == 0 && !(l > s) {
			t.Errorf("at 100 %%: p99 %.3f ms next to 5 ms kernels, %.3f ms next to 0.1 ms ones: want the long kernels worse", l, s)
		}
		if i > 0 {
			if l-s >= prevGap {
				t.Errorf("at %.0f %%: the difference %.3f ms did not shrink from %.3f ms", pct, l-s, prevGap)
			}
			if s > prevShort+1e-9 || l > prevLong+1e-9 {
				t.Errorf("at %.0f %%: p99 %.3f / %.3f ms rose from %.3f / %.3f ms as the percentage fell", pct, s, l, prevShort, prevLong)
			}
		}
		prevGap, prevShort, prevLong = l-s, s, l
	}
	// Unknown waves: no head-of-line wait, the fluid model's figure.
	fluid := trainer("long", 5000, 0)
	withWaves := p99(long, 100)
	if f := p99(fluid, 100); !(f < withWaves) {
		t.Errorf("5 ms kernels without waves: p99 %.3f ms, with: %.3f ms: want the wait only when the block time is known", f, withWaves)
	}
}
