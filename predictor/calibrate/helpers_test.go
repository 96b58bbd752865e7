package calibrate

import "github.com/colocd/colocd/predictor"

// uniformProfile is a workload of n equal ops.
func uniformProfile(name string, kind predictor.Kind, n int, durUS, gapUS float64) *predictor.Profile {
	ops := make([]predictor.Op, n)
	for i := range ops {
		ops[i] = predictor.Op{DurUS: durUS, GapUS: gapUS, SM: 1, Occupancy: 1}
	}
	return &predictor.Profile{Format: predictor.ProfileFormat, Name: name, Kind: kind, Ops: ops}
}

// mpsProfile is uniformProfile with an SM share and memory intensities, on an H200.
func mpsProfile(name string, kind predictor.Kind, n int, dur, gap, sm, dram, l2 float64) *predictor.Profile {
	p := uniformProfile(name, kind, n, dur, gap)
	for i := range p.Ops {
		d, l := dram, l2
		p.Ops[i].SM, p.Ops[i].DRAM, p.Ops[i].L2 = sm, &d, &l
	}
	p.Device = predictor.Device{Name: "NVIDIA H200", SMs: 132}
	return p
}
