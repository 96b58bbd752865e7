package predictor

import (
	"fmt"
	"math"
)

// Instance is the part of a GPU a scenario runs on when that is less than
// the whole: a MIG compute instance, with its own SMs and its share of the
// GPU's memory bandwidth and L2 (its memory slices over the GPU's). Every
// context of the scenario runs on it, and MPS percentages are of its SMs.
type Instance struct {
	// Name is for readers, e.g. "3g.71gb".
	Name string `json:"name,omitempty"`
	// SMs is the instance's streaming multiprocessors.
	SMs int `json:"sms"`
	// GPUSMs is the whole GPU's: the device a profile that names no
	// device.sms was taken on.
	GPUSMs int `json:"gpu_sms"`
	// Bandwidth is the instance's share of the GPU's DRAM bandwidth and
	// L2, in (0, 1]: 4/8 for an H200 3g.71gb.
	Bandwidth float64 `json:"bandwidth"`
}

// check names every bad field of the instance.
func (in *Instance) check(c *fieldChecker) {
	if in.SMs < 1 || in.SMs > MaxDeviceSMs {
		c.add("instance.sms", fmt.Sprintf("an SM count in [1, %d]", MaxDeviceSMs), fmt.Sprint(in.SMs))
	}
	if in.GPUSMs < in.SMs || in.GPUSMs > MaxDeviceSMs {
		c.add("instance.gpu_sms", fmt.Sprintf("the whole GPU's SM count, at least the instance's (%d) and at most %d", in.SMs, MaxDeviceSMs), fmt.Sprint(in.GPUSMs))
	}
	if !(in.Bandwidth > 0 && in.Bandwidth <= 1) {
		c.add("instance.bandwidth", "a share of the GPU's memory bandwidth in (0,1]", fmtFloat(in.Bandwidth))
	}
}

// Ops returns a profile's ops as they run alone on the instance. A profile
// taken on a device no larger than the instance (device.sms at most the
// instance's) runs as it is. One taken on a larger device (device.sms, or
// the whole GPU's when it names none) is assumed to have had that device's
// whole memory bandwidth; on the instance, each kernel:
//   - fills min(sm, C) of the profiled device, C = instance SMs / its SMs,
//     and so runs at speed min(sm, C)/sm;
//   - needs max(dram, l2)·speed of the GPU's memory bandwidth at that speed;
//     past the instance's share B the speed falls by B over that need
//     (the roofline, as the MPS model's stage 1);
//   - lasts dur/speed, fills min(1, sm/C) of the instance, and has memory
//     intensities dram·speed/B and l2·speed/B of the instance's bandwidth;
//     its thread blocks run in sm/min(sm, C) times as many waves.
//
// Gaps (host work) do not change. An intensity the profile lacks is
// estimated from the kernel's name, as the MPS model does, and scaled like
// a measured one (estimatedOps still counts it). The result shares nothing
// with the profile.
func (in *Instance) Ops(p *Profile) []Op {
	ops := p.Expanded()
	from := p.Device.SMs
	if from == 0 {
		from = in.GPUSMs
	}
	out := make([]Op, len(ops))
	if from <= in.SMs {
		copy(out, ops)
		for i := range out {
			out[i].DRAM, out[i].L2 = clonePtr(ops[i].DRAM), clonePtr(ops[i].L2)
		}
		return out
	}
	c := float64(in.SMs) / float64(from)
	b := in.Bandwidth
	for i := range ops {
		op := &ops[i]
		s := max(op.SM, 1/float64(from))
		u := min(s, c)
		speed := u / s
		dram, l2, _ := memoryIntensity(op, classify(op.Name))
		if need := max(dram, l2) * speed; need > b {
			speed *= b / need
		}
		o := Op{Name: op.Name, DurUS: op.DurUS / speed, GapUS: op.GapUS, SM: min(1, s/c), Occupancy: op.Occupancy,
			DRAM: ptr(min(1, dram*speed/b)), L2: ptr(min(1, l2*speed/b))}
		if op.Waves > 0 {
			o.Waves = op.Waves * s / u
		}
		out[i] = o
	}
	return out
}

// Speed is the share of its whole-GPU speed a workload keeps alone on the
// instance: its solo unit on the GPU over its solo unit on the instance.
func (in *Instance) Speed(p *Profile) float64 {
	return p.SoloUS() / opsUS(in.Ops(p))
}

// opsUS is the length of one unit of ops run alone: every gap and duration.
func opsUS(ops []Op) float64 {
	var t float64
	for i := range ops {
		t += ops[i].GapUS + ops[i].DurUS
	}
	return t
}

func ptr(v float64) *float64 {
	if math.IsNaN(v) {
		v = 0
	}
	return &v
}

func clonePtr(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// estimatedOps counts the ops of a profile whose memory intensities are
// estimated: on an instance they are filled in (Ops), and still estimates.
func estimatedOps(p *Profile) int {
	n := 0
	for _, op := range p.Expanded() {
		if op.DRAM == nil || op.L2 == nil {
			n++
		}
	}
	return n
}
