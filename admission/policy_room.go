package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/colocd/colocd/predictor"
)

// roomShare is the part of a decision's time left that the search for room
// among the live leases may take: the rest is for the commit.
const roomShare = 0.8

// makeRoom is the joint re-plan of an admit that does not fit at its
// min_pct next to the live leases as they run (deny, the first-come
// decision). The live leases, each between its min_pct and its percentage
// (lowered by at least Config.MinMovePct, never raised), and the job,
// between its min_pct and max_pct, are allocated jointly by shadow prices
// (policy_joint.go), valued at weight × predicted throughput. The job is admitted
// when the allocation fits, as the real predictor says, and gives more
// weighted throughput than the live leases give now without it; the
// decision's Joint then says which leases go down, and the commit throttles
// them (commitRoomLocked). Otherwise deny stands, its message saying why.
func (pol *policy) makeRoom(ctx context.Context, req *Request, key predictor.ProfileKey, live []liveLease, now time.Time, deny Decision) (Decision, error) {
	n := len(live)
	ts := make([]Trainer, n+1)
	jobs := make([]jointJob, n+1)
	lowerable := false
	for i, e := range live {
		l := &e.lease
		ts[i] = Trainer{Profile: l.Profile, Key: e.key}
		jobs[i] = jointJob{weight: pol.weight(l.Weight), grid: []int{l.Pct}, memoryMiB: l.MemoryMiB}
		if mayLower(l, req.Priority, now) {
			jobs[i].grid = pol.lowerGrid(l)
		}
		lowerable = lowerable || len(jobs[i].grid) > 1
	}
	if !lowerable {
		return deny, nil
	}
	ts[n] = Trainer{Profile: req.Profile, Key: key}
	jobs[n] = jointJob{weight: pol.weight(req.Weight), grid: pctGrid(req.MinPct, req.MaxPct, pol.cfg.PctStep), memoryMiB: req.memoryMiB()}

	jctx, cancel := roomContext(ctx)
	defer cancel()
	eval := pol.jointEvalOf(ts)
	// Memory and slots were checked before: the job's fit, and the live
	// leases hold theirs. Only the SLO slack is shared.
	plan, err := allocate(jctx, jobs, jointLimits{memoryMiB: math.MaxInt32, slots: n + 1}, eval, pol.cfg.SearchWorkers)
	var before jointProbe
	if err == nil {
		before, err = eval(jctx, append(currentPcts(live), 0))
	}
	switch {
	case err == nil:
	case errors.Is(err, errJointInfeasible):
		deny.Message += ", nor with every live lease lowered to its min_pct"
		return deny, nil
	case errors.Is(err, errNoThroughput):
		return deny, nil
	case ctx.Err() != nil:
		return Decision{}, ctxErr("decide", ctx)
	case jctx.Err() != nil:
		deny.Message += "; whether lowering the live leases makes room was not settled in the time left (the predictions made are kept: a retry settles it sooner)"
		return deny, nil
	case errors.Is(err, predictor.ErrTooManyEvents):
		return Decision{}, tooManyEvents()
	default:
		return unavailable(CodePredictorUnhealthy, "the prediction failed: "+err.Error())
	}
	j := &Joint{Prices: plan.prices, Utility: plan.utility, Before: utility(jobs, before), Shares: make([]JointShare, n+1)}
	for i, e := range live {
		j.Shares[i] = JointShare{LeaseID: e.lease.ID, JobID: e.lease.JobID, Weight: jobs[i].weight, Pct: plan.pcts[i], WasPct: e.lease.Pct,
			Throughput: plan.probe.thr[i], WasThroughput: before.thr[i]}
	}
	pct := plan.pcts[n]
	j.Shares[n] = JointShare{JobID: req.JobID, Weight: jobs[n].weight, Pct: pct, Throughput: plan.probe.thr[n]}
	if !(j.Utility > j.Before) {
		deny.Joint = j
		deny.Message += fmt.Sprintf("; lowering the live leases would fit it at %d %%, but the weighted throughput would fall from %.3f to %.3f (%s)",
			pct, j.Before, j.Utility, j.moves())
		return deny, nil
	}
	run := slices.Clone(ts)
	for i := range run {
		run[i].Pct = plan.pcts[i]
	}
	preds, p, err := pol.predictAll(ctx, run) // the allocation's own prediction: cached
	switch {
	case err != nil && ctx.Err() != nil:
		return Decision{}, ctxErr("decide", ctx)
	case err != nil:
		return unavailable(CodePredictorUnhealthy, "the prediction failed: "+err.Error())
	case !p.fits: // allocate returns only what fits: a predictor that changed its mind
		return deny, nil
	}
	d := Decision{Outcome: Throttle, Code: CodeSharedToFit, Pct: pct, Predictions: preds, Joint: j}
	if pct == req.MaxPct {
		d.Outcome = Grant
	}
	sp := pol.tightest(preds)
	d.Message = fmt.Sprintf("it fits at %d %% once %s, by joint allocation (%s): the weighted throughput goes from %.3f to %.3f, and predicted %s %s stays within %s",
		pct, j.moves(), sloPrice(j.Prices.SLO), j.Before, j.Utility, subject(sp), p99Text(sp), pol.limitText(sp))
	return d, nil
}

// mayLower reports whether an admit of the given priority may lower live
// lease l to make room: l is of that priority or lower (priorities are a
// strict order), live, not revoked, and not still to restart its workers
// after an earlier throttle (whose deadline a new throttle would push back).
func mayLower(l *Lease, priority int, now time.Time) bool {
	return l.Priority <= priority && !l.Revoked && !l.awaitingRestart() && now.Before(l.ExpiresAt)
}

// weight is what a job's declared weight counts for: 1 when it has none,
// at most Config.MaxWeight.
func (pol *policy) weight(w float64) float64 {
	return min(cmp.Or(w, 1), pol.cfg.MaxWeight)
}

// roomContext bounds the search for room to roomShare of the time ctx has
// left.
func roomContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(roomShare*float64(time.Until(dl))))
}

// moves says which live leases the allocation lowers, and what each keeps
// of its solo speed.
func (j *Joint) moves() string {
	var parts []string
	for _, s := range j.lowers() {
		parts = append(parts, fmt.Sprintf("job %s goes from %d %% to %d %% (weight %g, %.0f %% → %.0f %% of its solo speed)",
			s.JobID, s.WasPct, s.Pct, s.Weight, 100*s.WasThroughput, 100*s.Throughput))
	}
	if len(parts) == 0 {
		return "no live lease moves"
	}
	return strings.Join(parts, ", ")
}
