package admission

import (
	"context"
	"fmt"
	"math"

	"github.com/colocd/colocd/predictor"
)

// Summary is what the controller can take now: the figures of a fleet's
// capacity summary (docs/fleet.md), by which launchers rank GPUs before
// they ask any.
type Summary struct {
	// Healthy says it admits now: the GPU, in MPS mode the daemon, and the
	// predictor are well, and it is not drained; Reason says why not.
	Healthy bool
	Reason  string
	// Draining says the operator drained it (Controller.Drain).
	Draining bool
	// AvailableMiB is the memory a job may take now: the device's free
	// memory less the reserve and the leases not yet visible.
	AvailableMiB int
	// Leases are the live co-located leases; MaxJobs their bound.
	Leases, MaxJobs int
	// FreeInstances counts the MIG instances a job of the typical
	// request's memory would be lent whole now.
	FreeInstances int
	// Services are the predictions with the live leases, Margins each
	// one's 1 − held p99 × correction / limit, Margin the least.
	Services []ServicePrediction
	Margins  []float64
	Margin   float64
	// TypicalPct is the percentage a quote of the typical request gets
	// (100 for a lent instance; 0 for a deny or no answer).
	TypicalPct int
}

// Summarize reports the controller's capacity on a snapshot, without the
// lock, within ctx's deadline capped by Config.DecisionTimeout: the
// status's predictions and health, the memory a job may take, the free MIG
// instances, and what a quote of typical gets. A failed prediction is an
// unhealthy summary, not an error; only a context that ended is.
func (c *Controller) Summarize(ctx context.Context, typical Request) (Summary, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	s := c.snapshot()
	fc := s.pol
	sum := Summary{Healthy: true, Leases: len(s.live), MaxJobs: fc.cfg.MaxJobs, Margin: 1}
	// One snapshot for all: the predictions, the limits they are held to
	// and the leases.
	preds, _, err := fc.predictAll(ctx, trainersOf(s.live))
	gpuOK, gpuWhy := fc.device.Healthy()
	daemonOK, daemonWhy := true, ""
	if fc.cfg.Mode == predictor.ModeMPS {
		daemonOK, daemonWhy = fc.daemon.Healthy()
	}
	switch {
	case ctx.Err() != nil:
		return Summary{}, ctxErr("summarize", ctx)
	case s.drain != nil:
		sum.Healthy, sum.Draining, sum.Reason = false, true, s.drain.message()
	case err != nil:
		sum.Healthy, sum.Reason = false, "prediction: "+err.Error()
	case !gpuOK:
		sum.Healthy, sum.Reason = false, "gpu: "+gpuWhy
	case !daemonOK:
		sum.Healthy, sum.Reason = false, "mps daemon: "+daemonWhy
	}
	sum.Services = preds
	for i, sp := range preds {
		held := max(sp.PredictedP99MS, sp.UpperP99MS) * max(sp.Correction, 1)
		m := 1 - held/fc.limit(fc.cfg.Services[i])
		if math.IsNaN(m) {
			m = -1
		}
		m = max(m, -1e6)
		sum.Margins = append(sum.Margins, m)
		sum.Margin = min(sum.Margin, m)
	}
	if free, err := fc.device.FreeMemoryMiB(ctx); err == nil {
		sum.AvailableMiB = max(free-fc.cfg.MemoryReserveMiB-fc.pendingMiB(s.live, s.now), 0)
	} else if sum.Healthy {
		sum.Healthy, sum.Reason = false, "reading the GPU's free memory failed: "+err.Error()
	}
	if fc.instances != nil {
		if insts, err := fc.instances.Lendable(ctx); err == nil {
			sum.FreeInstances = len(freeInstances(insts, &s.view, typical.memoryMiB()))
		}
	}
	if d, err := c.Quote(ctx, typical); err == nil && d.Outcome != Deny {
		sum.TypicalPct = d.Pct
	} else if ctx.Err() != nil {
		return Summary{}, ctxErr("summarize", ctx)
	}
	return sum, nil
}

// String is a line for logs.
func (s Summary) String() string {
	return fmt.Sprintf("healthy=%v leases=%d/%d available=%dMiB free_instances=%d margin=%.3f typical_pct=%d",
		s.Healthy, s.Leases, s.MaxJobs, s.AvailableMiB, s.FreeInstances, s.Margin, s.TypicalPct)
}
