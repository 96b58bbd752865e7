package llm

import "math"

// Step is what one engine step computes, as the law needs it.
type Step struct {
	// Tokens is the step's scheduled tokens: prefill chunks plus one per
	// decode.
	Tokens int
	// KVTokens is the KV cache the step's attention reads, in tokens: for
	// each request its computed tokens plus those of this step.
	KVTokens float64
	// AttnPairs is the attention's query-key pairs: a request with c
	// tokens computed and n scheduled adds n·c + n(n+1)/2.
	AttnPairs float64
}

// Cost is a step's time in ms, broken down by the law's terms.
type Cost struct {
	// ComputeMS and MemoryMS are the roofline's two times, after the
	// trainers' share of the SMs and of the bandwidth.
	ComputeMS, MemoryMS float64
	// HOLMS is the head-of-line wait for the trainers' kernels.
	HOLMS float64
	// TotalMS is FixedMS + max(ComputeMS, MemoryMS) + HOLMS.
	TotalMS float64
}

// load is what the trainers next to a step amount to.
type load struct {
	smHeld   float64 // Σ Duty·Pct/100
	bwDemand float64 // Σ Duty·BandwidthFrac, of the peak
	waitMS   float64 // Σ Duty·Pct/100·min(KernelMS, MaxKernelMS)/2, per launch
}

// loadOf sums the trainers (those at Pct 0 do nothing).
func loadOf(trainers []Trainer, in Interference) load {
	var l load
	for _, t := range trainers {
		if t.Pct <= 0 {
			continue
		}
		p := float64(t.Pct) / 100
		l.smHeld += t.Duty * p
		l.bwDemand += t.Duty * t.BandwidthFrac
		l.waitMS += t.Duty * p * min(t.KernelMS, in.MaxKernelMS) / 2
	}
	return l
}

// StepCost is the step's time by the law of doc.go, with the trainers
// next to it and without noise.
func (c *Config) StepCost(s Step, trainers []Trainer) Cost {
	return c.cost(s, loadOf(trainers, c.Interference))
}

func (c *Config) cost(s Step, l load) Cost {
	m, h, in := &c.Model, &c.Hardware, &c.Interference
	flops := 2*m.Params*float64(s.Tokens) + 4*float64(m.Layers)*float64(m.Hidden)*s.AttnPairs
	compute := flops / (h.PeakFLOPS * h.MFU) * 1000
	memory := (m.WeightBytes() + m.KVBytesPerToken*s.KVTokens) / h.Bandwidth * 1000
	// (a) the SMs the trainers hold.
	compute /= max(in.MinSMShare, 1-l.smHeld)
	// (c) the bandwidth: while its kernels run the engine asks for the
	// fraction memory/busy of the peak; past the peak, each side gets a
	// share in proportion to its demand.
	busy := max(compute, memory)
	if busy > 0 && l.bwDemand > 0 && memory/busy+l.bwDemand > 1 {
		memory += l.bwDemand * busy
	}
	// (b) head-of-line waits, one chance per launch.
	hol := float64(m.Layers) * in.LaunchesPerLayer * l.waitMS
	return Cost{ComputeMS: compute, MemoryMS: memory, HOLMS: hol, TotalMS: h.FixedMS + max(compute, memory) + hol}
}

// noise is a log-normal factor of mean 1 from a standard normal draw z.
func noise(sigma, z float64) float64 {
	if sigma == 0 {
		return 1
	}
	return math.Exp(sigma*z - sigma*sigma/2)
}
