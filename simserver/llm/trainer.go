package llm

import (
	"fmt"
	"strconv"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/predictor"
)

// Trainer is a training job next to the engine, by the aggregates the
// interference law reads (doc.go), not by its kernels.
type Trainer struct {
	// Pct is its MPS active-thread percentage, 0 to 100; 0 is no effect.
	Pct int
	// Duty is the fraction of time its kernels occupy the GPU, 0 to 1.
	Duty float64
	// BandwidthFrac is its HBM bandwidth demand while busy, as a fraction
	// of the peak, 0 to 1.
	BandwidthFrac float64
	// KernelMS is its mean kernel length in ms.
	KernelMS float64
}

// DefaultBandwidthFrac is a trainer's bandwidth demand when its profile
// says nothing of memory: about what mixed-precision training's GEMMs and
// element-wise kernels ask for together, an assumption.
const DefaultBandwidthFrac = 0.3

// MaxKernelMS bounds Trainer.KernelMS: a minute.
const MaxKernelMS = 60_000

// Validate checks the trainer's fields and returns a *field.List naming
// each bad one, or nil.
func (t Trainer) Validate() error {
	var fc field.Checker
	if t.Pct < 0 || t.Pct > 100 {
		fc.Add("pct", "an active-thread percentage in [0, 100]", strconv.Itoa(t.Pct))
	}
	frac := func(path string, v float64) {
		if !(v >= 0 && v <= 1) {
			fc.Add(path, "a fraction in [0, 1]", strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	frac("duty", t.Duty)
	frac("bandwidth_frac", t.BandwidthFrac)
	if !(t.KernelMS >= 0 && t.KernelMS <= MaxKernelMS) {
		fc.Add("kernel_ms", fmt.Sprintf("a mean kernel length in [0, %d] ms", MaxKernelMS), strconv.FormatFloat(t.KernelMS, 'g', -1, 64))
	}
	return fc.Err("trainer")
}

// TrainerFromProfile sums a training profile into a Trainer at pct by
// plain aggregation: Duty is the ops' kernel time over their span (kernel
// time plus gaps), KernelMS their mean length, BandwidthFrac the
// time-weighted mean of the ops' dram intensities where given (else
// DefaultBandwidthFrac). A summary-only profile gives gpu_util as Duty,
// kernel_us (or the predictor's synthetic kernel length) as KernelMS, and
// min(1, mem_util/gpu_util) as BandwidthFrac. A nil or empty profile is a
// trainer that does nothing.
func TrainerFromProfile(p *predictor.Profile, pct int) Trainer {
	t := Trainer{Pct: pct, BandwidthFrac: DefaultBandwidthFrac}
	if p == nil {
		return Trainer{}
	}
	if len(p.Ops) > 0 {
		var busy, span, dramTime, dramWeighted float64
		for _, op := range p.Ops {
			busy += op.DurUS
			span += op.DurUS + op.GapUS
			if op.DRAM != nil {
				dramTime += op.DurUS
				dramWeighted += op.DurUS * *op.DRAM
			}
		}
		if span > 0 {
			t.Duty = clamp01(busy / span)
		}
		t.KernelMS = min(MaxKernelMS, busy/float64(len(p.Ops))/1000)
		if dramTime > 0 {
			t.BandwidthFrac = clamp01(dramWeighted / dramTime)
		}
		return t
	}
	if s := p.Summary; s != nil {
		t.Duty = clamp01(s.GPUUtil)
		k := s.KernelUS
		if !(k > 0) {
			k = predictor.SummaryKernelUS
		}
		t.KernelMS = min(MaxKernelMS, k/1000)
		if s.GPUUtil > 0 {
			t.BandwidthFrac = clamp01(s.MemUtil / s.GPUUtil)
		}
		return t
	}
	return Trainer{}
}

// clamp01 clamps v to [0, 1], NaN to 0.
func clamp01(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return min(v, 1)
}
