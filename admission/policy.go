package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/colocd/colocd/predictor"
)

// policy is the decision policy, apart from the lease book: what a request
// is granted (health, max_jobs, memory, the percentage search, and room
// made by lowering live leases), how the live leases are re-planned when
// the SLOs, the observed load or the observed latency move, and how far
// lowered leases may rise again. It decides on what a snapshot gives it —
// its config (the services at their observed loads and corrections, their
// SLOs, the headroom and the limits) and a view of the live leases, copied
// — and answers
// with a Decision or new percentages; the Controller applies them to its
// leases. It holds no lock, no store and no lease, and changes nothing: it
// reads the world only through the predictor and the device (health, free
// memory, MIG instances). Everything it does may run without c.mu.
type policy struct {
	cfg       Config
	predictor Predictor
	device    Device
	daemon    Daemon    // MPS mode
	instances Instances // nil: no MIG instance is lent
	log       *slog.Logger
	// learned is the guard's learned response when the policy was made
	// (a clone: the policy only reads it), and stale when a learned ratio
	// measured before it gives way to a newer one a step below.
	learned learned
	stale   time.Time
}

// liveLease is a live lease as the policy sees it: a copy of the lease, and
// its profile's content hash, computed once.
type liveLease struct {
	lease Lease
	key   predictor.ProfileKey
	// raiseBelow, when above 0, bounds what a raise may offer the lease:
	// less than this, a percentage a recent raise reached and the guard
	// had to lower it from (holds.lowerAfterRaise).
	raiseBelow int
}

// copy is a copy of l that shares none of its slices.
func (l *liveLease) copy() liveLease {
	return liveLease{lease: l.lease.clone(), key: l.key, raiseBelow: l.raiseBelow}
}

// view is the state of the leases a policy decides on, at now.
type view struct {
	now  time.Time
	live []liveLease // the co-located leases, oldest first: the trainers of a prediction
	// lent are the leases that hold a MIG instance whole: they run next to
	// no service, so no prediction counts them.
	lent []liveLease
	// readmitAt: after the guard revoked a lease, no new job is co-located
	// before it (holds.readmitAt).
	readmitAt time.Time
	// rivals are the identities besides the leases' holders that may want
	// the GPU (identity.go).
	rivals []string
	// drain, when set, denies every request (drain.go).
	drain *Drain
}

// newPolicy returns the policy for cfg, reading the world through deps'
// predictor, device, daemon and MIG instances (never its store, events or
// evictor).
func newPolicy(cfg Config, deps Deps, log *slog.Logger) *policy {
	return &policy{cfg: cfg, predictor: deps.Predictor, device: deps.Device, daemon: deps.Daemon, instances: deps.Instances, log: log}
}

// decide makes the decision for a valid request on view v: health, a
// free MIG instance, max_jobs, memory, then the percentage search and, for
// a job that does not fit next to the live leases, room made by lowering
// them (makeRoom).
func (pol *policy) decide(ctx context.Context, req *Request, key predictor.ProfileKey, v *view) (Decision, error) {
	notes := pol.cfg.capClaims(req)
	d, err := pol.decideCapped(ctx, req, key, v)
	if len(notes) > 0 && d.Outcome != "" {
		d.Message += " (" + strings.Join(notes, "; ") + ")"
	}
	return d, err
}

// decideCapped is decide, for a request whose claims are capped.
func (pol *policy) decideCapped(ctx context.Context, req *Request, key predictor.ProfileKey, v *view) (Decision, error) {
	if v.drain != nil {
		return Decision{Outcome: Deny, Code: CodeDraining, Message: v.drain.message() + ": no job is admitted until colocd undrain"}, nil
	}
	if ok, why := pol.device.Healthy(); !ok {
		return unavailable(CodeGPUUnhealthy, "the GPU is unhealthy: "+why)
	}
	// A free MIG instance is the best grant, and needs no MPS daemon.
	if d, ok := pol.lend(ctx, req, v); ok {
		return d, nil
	}
	if pol.cfg.Mode == predictor.ModeMPS {
		if ok, why := pol.daemon.Healthy(); !ok {
			return unavailable(CodeDaemonUnhealthy, "the MPS daemon is unhealthy: "+why)
		}
	}
	if v.now.Before(v.readmitAt) {
		return Decision{Outcome: Deny, Code: CodeRecentRevoke, Message: fmt.Sprintf("the guard revoked a lease on this GPU for the servers' load or latency; "+
			"new jobs are admitted again from %s (admission.guard.raise_after after the revoke, doubled for each further revoke in the hour)",
			v.readmitAt.UTC().Format(time.RFC3339))}, nil
	}
	if n := len(v.live); n >= pol.cfg.MaxJobs {
		jobs := fmt.Sprintf("%d training jobs", n)
		if n == 1 {
			jobs = "1 training job"
		}
		return Decision{Outcome: Deny, Code: CodeMaxJobs, Message: "the GPU already runs " + jobs +
			", the most admission.max_jobs allows"}, nil
	}
	quota, denied, quotaTop := pol.quota(req, v)
	if denied {
		return quota, nil
	}
	if d, denied, err := pol.checkMemory(ctx, req, v.live, v.now); denied || err != nil {
		return d, err
	}
	grid, top := []int{100}, req.MaxPct
	if pol.cfg.Mode == predictor.ModeMPS {
		top = pol.firstMax(req)
		grid = pctGrid(req.MinPct, min(top, quotaTop), pol.cfg.PctStep)
	}
	others := trainersOf(v.live)
	results := make([][]ServicePrediction, len(grid))
	var rmu sync.Mutex
	trainersAt := func(i int) []Trainer {
		return append(slices.Clone(others), Trainer{Profile: req.Profile, Key: key, Pct: grid[i]})
	}
	eval := func(ctx context.Context, i int) (probe, error) {
		preds, p, err := pol.predictAll(ctx, trainersAt(i))
		rmu.Lock()
		results[i] = preds
		rmu.Unlock()
		return p, err
	}
	best, err := searchGrid(ctx, grid, pol.cfg.SearchWorkers, eval, func(i int) bool { return pol.known(trainersAt(i)) })
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return Decision{}, ctxErr("decide", ctx)
	case errors.Is(err, predictor.ErrTooManyEvents):
		return Decision{}, tooManyEvents()
	default:
		return unavailable(CodePredictorUnhealthy, "the prediction failed: "+err.Error())
	}
	d := pol.outcome(grid, best, results)
	if best >= 0 {
		d.Pct = grid[best]
	}
	switch {
	case d.Outcome != Grant:
	case top < req.MaxPct && top <= quotaTop:
		d.Outcome, d.Code = Throttle, CodeMeasureFirst
		d.Message = fmt.Sprintf("%s; the guard has not yet measured the servers' latency next to a training job, so a new job starts at its min_pct and is raised once the measurement shows room (admission.guard.grant_before_measured)", d.Message)
	case quotaTop < req.MaxPct:
		d.Outcome, d.Code = Throttle, CodeIdentityQuota
		d.Message = fmt.Sprintf("%s; %d %% is what this launcher identity's quota of the GPU's threads leaves it (admission.identity.max_gpu_pct)", d.Message, d.Pct)
	}
	if best < 0 && pol.cfg.Mode == predictor.ModeMPS && len(v.live) > 0 {
		capped := *req
		capped.MaxPct = min(req.MaxPct, quotaTop)
		return pol.makeRoom(ctx, &capped, key, v.live, v.now, d)
	}
	return d, nil
}

// tooManyEvents is the 400 of a request whose profile makes the simulation
// exceed the predictor's event cap: the live leases and the services were
// simulated within it before, so the new profile is what does not fit.
func tooManyEvents() error {
	var f fields
	f.add("profile", "a training profile the predictor can simulate next to the live leases within its work budget (predictor.max_events; fewer, longer kernels per iteration)",
		"a profile whose simulation exceeds the budget")
	return f.err("request")
}

// checkMemory denies a job whose memory does not fit: NVML's free memory,
// less the reserve, less the memory of leases not yet visible to NVML.
func (pol *policy) checkMemory(ctx context.Context, req *Request, live []liveLease, now time.Time) (Decision, bool, error) {
	free, err := pol.device.FreeMemoryMiB(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Decision{}, true, ctxErr("decide", ctx)
		}
		d, err := unavailable(CodeGPUUnhealthy, "reading the GPU's free memory failed: "+err.Error())
		return d, true, err
	}
	pending := pol.pendingMiB(live, now)
	need, avail := req.memoryMiB(), free-pol.cfg.MemoryReserveMiB-pending
	if need <= avail {
		return Decision{}, false, nil
	}
	msg := fmt.Sprintf("the job needs %d MiB of GPU memory but only %d MiB is available (%d MiB free, less the %d MiB reserve",
		need, max(avail, 0), free, pol.cfg.MemoryReserveMiB)
	if pending > 0 {
		msg += fmt.Sprintf(", less %d MiB granted to jobs that have not started yet", pending)
	}
	return Decision{Outcome: Deny, Code: CodeInsufficientMemory, Message: msg + ")"}, true, nil
}

// pendingMiB is the memory of the leases of live that NVML cannot see yet
// (notYetVisible): what the device's free memory still counts as free.
func (pol *policy) pendingMiB(live []liveLease, now time.Time) int {
	pending := 0
	for i := range live {
		if e := &live[i]; pol.notYetVisible(&e.lease, now) {
			pending += e.lease.MemoryMiB
		}
	}
	return pending
}

// notYetVisible reports whether NVML cannot see l's memory yet: granted less
// than VisibilityWindow ago and no PIDs registered. Once the launcher
// registers its processes (or the window passes) the memory counts through
// NVML's free figure instead.
func (pol *policy) notYetVisible(l *Lease, now time.Time) bool {
	return len(l.PIDs) == 0 && now.Sub(l.CreatedAt) < pol.cfg.VisibilityWindow
}

// predictAll predicts every service with trainers; the probe says whether
// all stay within their limits, and by how much the worst does not.
func (pol *policy) predictAll(ctx context.Context, trainers []Trainer) ([]ServicePrediction, probe, error) {
	preds := make([]ServicePrediction, len(pol.cfg.Services))
	p := probe{fits: true}
	for i, svc := range pol.cfg.Services {
		lat, err := pol.predictor.PredictP99(ctx, pol.cfg.Services, i, trainers, pol.cfg.Mode)
		if err != nil {
			return nil, probe{}, err
		}
		corr := svc.correction()
		preds[i] = ServicePrediction{Service: svc.Name, RateRPS: svc.RateRPS, SLOP99MS: svc.SLOP99MS, SoloP99MS: lat.SoloP99MS,
			PredictedP99MS: lat.P99MS, UpperP99MS: lat.P99HighMS, Correction: corr, Step: svc.BurstSteps > 0}
		if r, ok := pol.learnedRatio(svc.Name, trainers); ok {
			preds[i].Learned = r
		}
		limit := pol.limit(svc)
		held := preds[i].heldP99()
		p.fits = p.fits && held <= limit
		p.score = max(p.score, held/limit)
		p.soloScore = max(p.soloScore, lat.SoloP99MS*corr/limit)
		if i == 0 {
			p.throughput = lat.Throughput
		}
	}
	return preds, p, nil
}

// learnedRatio is the learned ratio for service beside trainers, when one
// applies: MPS, one trainer, measured at or near its percentage
// (guard_response.go).
func (pol *policy) learnedRatio(service string, trainers []Trainer) (float64, bool) {
	if pol.cfg.Mode != predictor.ModeMPS || len(trainers) != 1 || !pol.learned.has(service) {
		return 0, false
	}
	t := trainers[0]
	key := t.Key
	if key == (predictor.ProfileKey{}) && t.Profile != nil {
		key = t.Profile.Key()
	}
	return pol.learned.ratio(service, key, t.Pct, max(pol.cfg.PctStep, pol.cfg.Guard.MinMovePct), pol.stale)
}

// known reports whether the predictor has every service's prediction with
// trainers at hand (false when it cannot tell).
func (pol *policy) known(trainers []Trainer) bool {
	kp, ok := pol.predictor.(KnowingPredictor)
	if !ok {
		return false
	}
	for i := range pol.cfg.Services {
		if !kp.Known(pol.cfg.Services, i, trainers, pol.cfg.Mode) {
			return false
		}
	}
	return true
}

// limit is the p99 a service may reach: (1 − headroom) × SLO.
func (pol *policy) limit(svc ServiceSpec) float64 { return (1 - pol.cfg.Headroom) * svc.SLOP99MS }

// outcome turns the search's result into a decision.
func (pol *policy) outcome(grid []int, best int, results [][]ServicePrediction) Decision {
	top := len(grid) - 1
	switch {
	case best == top:
		return Decision{Outcome: Grant, Code: CodeFits, Predictions: results[top],
			Message: pol.fitsMessage(results[top], grid[top])}
	case best >= 0:
		return Decision{Outcome: Throttle, Code: CodeThrottledToFit, Predictions: results[best],
			Message: pol.throttleMessage(grid, best, results)}
	case pol.cfg.Mode == predictor.ModeTimeslice:
		return Decision{Outcome: Deny, Code: CodeTimesliceNoFit, Predictions: results[0],
			Message: "under time slicing, " + pol.violation(results[0])}
	default:
		return Decision{Outcome: Deny, Code: CodeSLOViolation, Predictions: results[0],
			Message: fmt.Sprintf("%s even at %d %%", pol.violation(results[0]), grid[0])}
	}
}

func trainersOf(live []liveLease) []Trainer {
	ts := make([]Trainer, len(live))
	for i, e := range live {
		ts[i] = Trainer{Profile: e.lease.Profile, Key: e.key, Pct: e.lease.Pct}
	}
	return ts
}

// firstMax is the highest percentage a new job may be granted: its
// max_pct, or its min_pct while the guard has yet to measure some
// service's latency next to a training job. The prediction is the
// model's until the server has shown what co-location does to it; a
// job granted its lowest percentage costs least if the model is wrong,
// and the guard raises it once the measurement shows room.
//
// A job whose trainer the guard has learned the response of
// (guard_response.go) may go as far as that allows: one step above the highest
// percentage measured.
func (pol *policy) firstMax(req *Request) int {
	for _, s := range pol.cfg.Services {
		if s.Unmeasured && !(pol.cfg.Mode == predictor.ModeMPS && req.Profile != nil && pol.learned.hasTrainer(s.Name, req.Profile.Key())) {
			return req.MinPct
		}
	}
	return req.MaxPct
}
