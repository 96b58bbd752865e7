package migplan

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/predictor"
)

// Input is what a plan is for: one inference service at a rate under a p99
// SLO and one trainer, on a GPU model named as NVML names it.
type Input struct {
	GPU                 string
	Inference, Training *predictor.Profile
	RateRPS, SLOP99MS   float64
	// Headroom is the share of the SLO kept free (admission.headroom).
	Headroom float64
	// Requests and Seed are each prediction's; PctStep the MPS
	// percentage search's step.
	Requests int
	Seed     uint64
	PctStep  int
	// Calibration is the device's, for MPS sharing of the whole GPU.
	Calibration *predictor.Calibration
}

// Check validates the figures, before any profile is read. Its errors name
// the flags of colocd mig plan, every one wrong at once.
func (in *Input) Check() error {
	var errs []error
	if !(in.RateRPS >= predictor.MinRateRPS && in.RateRPS <= 1e9) {
		errs = append(errs, fmt.Errorf("--rate: want a rate in [0.001, 1e9] req/s, got %g", in.RateRPS))
	}
	if !(in.SLOP99MS > 0 && in.SLOP99MS <= predictor.MaxDurationUS/1000) {
		errs = append(errs, fmt.Errorf("--slo-p99-ms: want a p99 in (0, 3.6e6] ms, got %g", in.SLOP99MS))
	}
	if !(in.Headroom >= 0 && in.Headroom < 1) {
		errs = append(errs, fmt.Errorf("--headroom: want a fraction in [0, 1), got %g", in.Headroom))
	}
	if in.PctStep < 1 || in.PctStep > 100 {
		errs = append(errs, fmt.Errorf("--pct-step: want a step in [1, 100], got %d", in.PctStep))
	}
	if in.Requests < 1 {
		errs = append(errs, fmt.Errorf("--requests: want a count ≥ 1, got %d", in.Requests))
	}
	return errors.Join(errs...)
}

// Plan is the layouts ranked, MPS beside them, and the best of all
// (`colocd mig plan --json`).
type Plan struct {
	GPU      string  `json:"gpu"`
	GPUSMs   int     `json:"gpu_sms"`
	RateRPS  float64 `json:"rate_rps"`
	SLOP99MS float64 `json:"slo_p99_ms"`
	Headroom float64 `json:"headroom"`
	// LimitMS is what a p99 must stay under: (1 − headroom) × SLO.
	LimitMS float64 `json:"limit_ms"`
	// SoloP99MS is the inference p99 alone on the whole GPU.
	SoloP99MS float64    `json:"solo_p99_ms"`
	Layouts   []Layout   `json:"layouts"`
	MPS       MPS        `json:"mps"`
	Best      string     `json:"best"` // "mig", "mps" or "none"
	Instances []Instance `json:"instances"`
	Warnings  []string   `json:"warnings,omitempty"`
}

// Instance is one instance profile's figures: the inference p99 alone
// on it and the trainer's speed alone on it.
type Instance struct {
	Profile   string  `json:"profile"`
	SMs       int     `json:"sms"`
	MemoryMiB int     `json:"memory_mib"`
	Bandwidth float64 `json:"bandwidth"`
	// P99MS is the inference service's p99 alone on the instance at the
	// rate; InferenceFits says its memory fits.
	P99MS         float64 `json:"inference_p99_ms"`
	InferenceFits bool    `json:"inference_fits"`
	// Throughput is the share of its whole-GPU speed the trainer keeps
	// alone on the instance; TrainingFits says its memory fits.
	Throughput   float64 `json:"training_throughput"`
	TrainingFits bool    `json:"training_fits"`
}

// Layout is one layout, with the best placement of the two workloads.
type Layout struct {
	Rank   int    `json:"rank"`
	Layout string `json:"layout"`
	// Inference is the instance the service runs on, alone; SLOHolds says
	// its p99 is under the limit there.
	Inference string  `json:"inference_instance"`
	P99MS     float64 `json:"inference_p99_ms"`
	SLOHolds  bool    `json:"slo_holds"`
	// Training is the instance the trainer runs on ("" when none is left
	// or fits); Throughput its share of its whole-GPU speed.
	Training   string  `json:"training_instance"`
	Throughput float64 `json:"training_throughput"`
	// Spare are the layout's other instances, free for other work.
	Spare []string `json:"spare"`
}

// MPS is the whole GPU shared under MPS at the highest percentage (in
// steps) that holds the SLO.
type MPS struct {
	// Pct is the trainer's active-thread percentage; 0 when none holds:
	// P99MS is then that at LowestPct, the lowest tried, and Throughput 0.
	Pct        int     `json:"pct"`
	LowestPct  int     `json:"lowest_pct,omitempty"`
	P99MS      float64 `json:"inference_p99_ms"`
	SLOHolds   bool    `json:"slo_holds"`
	Throughput float64 `json:"training_throughput"`
	Fits       bool    `json:"memory_fits"`
}

// Make predicts every instance profile of the GPU once, places the
// service and the trainer on each distinct layout where the trainer goes
// fastest with the SLO held (else where the service's p99 is lowest), and
// searches the MPS percentage of the whole GPU. An unknown GPU is an error
// that names --gpu, the flag of colocd mig plan.
func Make(in Input) (*Plan, error) {
	profiles, err := gpu.MIGProfiles(in.GPU)
	if err != nil {
		return nil, fmt.Errorf("--gpu: %w", err)
	}
	gpuSMs, err := gpu.SMCount(in.GPU)
	if err != nil {
		return nil, fmt.Errorf("--gpu: %w", err)
	}
	gpuMiB := 0
	for _, p := range profiles {
		gpuMiB = max(gpuMiB, p.MemoryMiB)
	}
	plan := &Plan{GPU: in.GPU, GPUSMs: gpuSMs, RateRPS: in.RateRPS, SLOP99MS: in.SLOP99MS, Headroom: in.Headroom, LimitMS: (1 - in.Headroom) * in.SLOP99MS}
	for _, p := range []*predictor.Profile{in.Inference, in.Training} {
		switch {
		case p.Device.Name != "" && p.Device.Name != in.GPU:
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s was profiled on %s, not %s: its kernel times are that device's", p.Name, p.Device.Name, in.GPU))
		case p.Device.SMs != 0 && p.Device.SMs != gpuSMs:
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s was profiled on %d SMs, not the whole GPU's %d (a MIG instance?): the plan scales profiles taken on the whole GPU", p.Name, p.Device.SMs, gpuSMs))
		}
	}
	var pr predictor.Predictor
	solo, err := pr.PredictMPS(&predictor.Scenario{Inference: in.Inference, RateRPS: in.RateRPS, Requests: in.Requests, Seed: in.Seed, DeviceSMs: gpuSMs}, predictor.MPSParams{})
	if err != nil {
		return nil, err
	}
	plan.SoloP99MS = solo.Inference.LatencyMS.P99
	byName := map[string]Instance{}
	for _, p := range profiles {
		inst := predictor.Instance{Name: p.Name, SMs: p.SMs, GPUSMs: gpuSMs, Bandwidth: float64(p.MemorySlices) / gpu.MIGMemorySlices}
		pred, err := pr.PredictMPS(&predictor.Scenario{Inference: in.Inference, RateRPS: in.RateRPS, Requests: in.Requests, Seed: in.Seed, Instance: &inst}, predictor.MPSParams{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		pp := Instance{Profile: p.Name, SMs: p.SMs, MemoryMiB: p.MemoryMiB, Bandwidth: inst.Bandwidth,
			P99MS: pred.Inference.LatencyMS.P99, InferenceFits: in.Inference.MemoryMiB <= float64(p.MemoryMiB),
			Throughput: inst.Speed(in.Training), TrainingFits: in.Training.MemoryMiB <= float64(p.MemoryMiB)}
		byName[p.Name] = pp
		plan.Instances = append(plan.Instances, pp)
	}
	for _, l := range gpu.MIGLayouts(profiles) {
		var insts []Instance
		for _, pl := range l {
			insts = append(insts, byName[pl.Profile.Name])
		}
		plan.Layouts = append(plan.Layouts, placeOnLayout(l.Names(), insts, plan.LimitMS))
	}
	slices.SortStableFunc(plan.Layouts, func(a, b Layout) int {
		if a.SLOHolds != b.SLOHolds {
			if a.SLOHolds {
				return -1
			}
			return 1
		}
		if !a.SLOHolds { // neither is usable: the nearer to the SLO first, one that fits the service nowhere last
			if ai, bi := a.Inference != "", b.Inference != ""; ai != bi {
				return cmp.Compare(boolRank(bi), boolRank(ai))
			}
			return cmp.Or(cmp.Compare(a.P99MS, b.P99MS), cmp.Compare(b.Throughput, a.Throughput))
		}
		return cmp.Or(cmp.Compare(b.Throughput, a.Throughput), cmp.Compare(a.P99MS, b.P99MS))
	})
	for i := range plan.Layouts {
		plan.Layouts[i].Rank = i + 1
	}
	if plan.MPS, err = searchMPS(&pr, in, gpuSMs, plan.LimitMS); err != nil {
		return nil, err
	}
	plan.MPS.Fits = in.Inference.MemoryMiB+in.Training.MemoryMiB <= float64(gpuMiB)
	best := plan.Layouts[0]
	mps := plan.MPS.SLOHolds && plan.MPS.Fits
	switch {
	case best.SLOHolds && best.Throughput > 0 && (!mps || best.Throughput > plan.MPS.Throughput):
		plan.Best = "mig"
	case mps:
		plan.Best = "mps"
	default:
		plan.Best = "none"
	}
	return plan, nil
}

// placeOnLayout puts the service and the trainer on two of a layout's
// instances: of the placements whose service holds the limit, the one where
// the trainer goes fastest (then the lower p99); with none, the service on
// its fastest instance and the trainer on the best of the rest.
func placeOnLayout(name string, insts []Instance, limit float64) Layout {
	best := Layout{Layout: name, P99MS: -1}
	better := func(c Layout) bool {
		switch {
		case best.P99MS < 0:
			return true
		case c.SLOHolds != best.SLOHolds:
			return c.SLOHolds
		case c.SLOHolds && c.Throughput != best.Throughput:
			return c.Throughput > best.Throughput
		case c.P99MS != best.P99MS:
			return c.P99MS < best.P99MS
		}
		return c.Throughput > best.Throughput
	}
	var bi, bt int
	for i, inf := range insts {
		if !inf.InferenceFits {
			continue
		}
		c := Layout{Layout: name, Inference: inf.Profile, P99MS: inf.P99MS, SLOHolds: inf.P99MS <= limit}
		ct := -1
		for j, tr := range insts {
			if j != i && tr.TrainingFits && (ct < 0 || tr.Throughput > insts[ct].Throughput) {
				ct = j
			}
		}
		if ct >= 0 {
			c.Training, c.Throughput = insts[ct].Profile, insts[ct].Throughput
		}
		if better(c) {
			best, bi, bt = c, i, ct
		}
	}
	if best.P99MS < 0 { // the service fits on no instance
		best = Layout{Layout: name}
		bi, bt = -1, -1
	}
	best.Spare = []string{}
	for k, inst := range insts {
		if k != bi && k != bt {
			best.Spare = append(best.Spare, inst.Profile)
		}
	}
	return best
}

// searchMPS finds the highest trainer percentage, in steps down from 100,
// whose inference p99 on the whole GPU holds the limit (the p99 does not
// rise as the percentage falls).
func searchMPS(pr *predictor.Predictor, in Input, sms int, limit float64) (MPS, error) {
	var last MPS
	for pct := 100; pct >= in.PctStep; pct -= in.PctStep {
		sc := &predictor.Scenario{Inference: in.Inference, Training: []*predictor.Profile{in.Training}, RateRPS: in.RateRPS,
			Requests: in.Requests, Seed: in.Seed, TrainingPct: []float64{float64(pct)}, DeviceSMs: sms}
		pred, err := pr.PredictMPS(sc, in.Calibration.MPS.Params())
		if err != nil {
			return MPS{}, fmt.Errorf("mps at %d %%: %w", pct, err)
		}
		last = MPS{Pct: pct, P99MS: pred.Inference.LatencyMS.P99, Throughput: pred.Training[0].Throughput}
		if last.P99MS <= limit {
			last.SLOHolds = true
			return last, nil
		}
	}
	// None holds: the lowest percentage's figures, at no percentage.
	last.Pct, last.LowestPct, last.Throughput = 0, last.Pct, 0
	return last, nil
}

// boolRank orders false before true.
func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteText writes the plan as a table a person reads.
func (p *Plan) WriteText(w io.Writer) error {
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "%s, %d SMs; the service at %g req/s must keep its p99 under %.3g ms (SLO %g ms, headroom %g); alone on the whole GPU: %.3f ms\n\n",
		p.GPU, p.GPUSMs, p.RateRPS, p.LimitMS, p.SLOP99MS, p.Headroom, p.SoloP99MS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rank\tlayout\tinference on\tp99 ms\tSLO\ttrainer on\tthroughput\tspare")
	for _, l := range p.Layouts {
		tr, thr := l.Training, fmt.Sprintf("%.3f", l.Throughput)
		if tr == "" {
			tr, thr = "-", "-"
		}
		inf, p99 := l.Inference, fmt.Sprintf("%.3f", l.P99MS)
		if inf == "" {
			inf, p99 = "(fits none)", "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Rank, l.Layout, inf, p99, holds(l.SLOHolds), tr, thr, cmp.Or(strings.Join(l.Spare, "+"), "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	m := p.MPS
	if m.SLOHolds {
		fmt.Fprintf(w, "\nmps, whole GPU: trainer at %d %%: inference p99 %.3f ms (holds), trainer throughput %.3f", m.Pct, m.P99MS, m.Throughput)
	} else {
		fmt.Fprintf(w, "\nmps, whole GPU: no trainer percentage holds the SLO (at the lowest, %d %%, inference p99 %.3f ms)", m.LowestPct, m.P99MS)
	}
	if !m.Fits {
		fmt.Fprint(w, "; the two do not fit in the GPU's memory")
	}
	fmt.Fprintln(w)
	b := p.Layouts[0]
	switch p.Best {
	case "mig":
		fmt.Fprintf(w, "best: MIG %s (the trainer keeps %.3f of its speed on %s, under MPS %.3f)\n", b.Layout, b.Throughput, b.Training, m.Throughput)
	case "mps":
		if b.SLOHolds && b.Throughput > 0 {
			fmt.Fprintf(w, "best: MPS at %d %% (the trainer keeps %.3f of its speed; on MIG %s, %.3f)\n", m.Pct, m.Throughput, b.Layout, b.Throughput)
		} else {
			fmt.Fprintf(w, "best: MPS at %d %% (the trainer keeps %.3f of its speed; no MIG layout holds the SLO with an instance left for the trainer)\n", m.Pct, m.Throughput)
		}
	default:
		fmt.Fprintln(w, "best: none; no layout and no MPS percentage holds the SLO with room for the trainer")
	}
	return nil
}

func holds(ok bool) string {
	if ok {
		return "holds"
	}
	return "misses"
}
