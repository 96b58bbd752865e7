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

// publishTimeout bounds the publishing of the throttle events a decision
// made, whose own deadline may have passed.
const publishTimeout = 5 * time.Second

// makeRoom is the joint re-plan of an admit that does not fit at its
// min_pct next to the live leases as they run (deny, the first-come
// decision). The live leases, each between its min_pct and its percentage
// (lowered by at least Config.MinMovePct, never raised), and the job,
// between its min_pct and max_pct, are allocated jointly by shadow prices
// (joint.go), valued at weight × predicted throughput. The job is admitted
// when the allocation fits, as the real predictor says, and gives more
// weighted throughput than the live leases give now without it; the
// decision's Joint then says which leases go down, and the commit throttles
// them (commitRoomLocked). Otherwise deny stands, its message saying why.
// It predicts: call it on a frozen controller, without the lock.
func (c *Controller) makeRoom(ctx context.Context, req *Request, key predictor.ProfileKey, live []entry, now time.Time, deny Decision) (Decision, error) {
	n := len(live)
	ts := make([]Trainer, n+1)
	jobs := make([]jointJob, n+1)
	lowerable := false
	for i, e := range live {
		l := &e.lease
		ts[i] = Trainer{Profile: l.Profile, Key: e.key}
		jobs[i] = jointJob{weight: c.weight(l.Weight), grid: []int{l.Pct}, memoryMiB: l.MemoryMiB}
		if mayLower(l, req.Priority, now) {
			jobs[i].grid = c.lowerGrid(l)
		}
		lowerable = lowerable || len(jobs[i].grid) > 1
	}
	if !lowerable {
		return deny, nil
	}
	ts[n] = Trainer{Profile: req.Profile, Key: key}
	jobs[n] = jointJob{weight: c.weight(req.Weight), grid: pctGrid(req.MinPct, req.MaxPct, c.cfg.PctStep), memoryMiB: req.memoryMiB()}

	jctx, cancel := roomContext(ctx)
	defer cancel()
	eval := c.jointEvalOf(ts)
	// Memory and slots were checked before: the job's fit, and the live
	// leases hold theirs. Only the SLO slack is shared.
	plan, err := allocate(jctx, jobs, jointLimits{memoryMiB: math.MaxInt32, slots: n + 1}, eval, c.cfg.SearchWorkers)
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
		return Decision{}, c.ctxErr("decide", ctx)
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
	preds, p, err := c.predictAll(ctx, run) // the allocation's own prediction: cached
	switch {
	case err != nil && ctx.Err() != nil:
		return Decision{}, c.ctxErr("decide", ctx)
	case err != nil:
		return unavailable(CodePredictorUnhealthy, "the prediction failed: "+err.Error())
	case !p.fits: // allocate returns only what fits: a predictor that changed its mind
		return deny, nil
	}
	d := Decision{Outcome: Throttle, Code: CodeSharedToFit, Pct: pct, Predictions: preds, Joint: j}
	if pct == req.MaxPct {
		d.Outcome = Grant
	}
	sp := c.tightest(preds)
	d.Message = fmt.Sprintf("it fits at %d %% once %s, by joint allocation (%s): the weighted throughput goes from %.3f to %.3f, and predicted %s %s stays within %s",
		pct, j.moves(), sloPrice(j.Prices.SLO), j.Before, j.Utility, subject(sp), p99Text(sp), c.limitText(sp))
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
func (c *Controller) weight(w float64) float64 {
	return min(cmp.Or(w, 1), c.cfg.MaxWeight)
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

// commitRoomLocked throttles the leases d's joint allocation lowers, before
// d's lease is created: lowering a lease is safe on its own, so a store
// that refuses a write leaves the GPU no worse off, and the job is not
// admitted. It returns the throttle events, and ok = false (nothing
// granted; evaluate again) when a lease it lowers changed or anything else
// moved while the throttles were written. c.mu is held (and released while
// a record is written).
func (c *Controller) commitRoomLocked(ctx context.Context, s *snapshot, d Decision, now time.Time) ([]Event, bool, error) {
	lower := d.Joint.lowers()
	if len(lower) == 0 {
		return nil, true, nil
	}
	planned := make([]entry, 0, len(lower))
	pcts := make([]int, 0, len(lower))
	for _, sh := range lower {
		for _, e := range s.live {
			if e.lease.ID == sh.LeaseID {
				planned = append(planned, e)
				pcts = append(pcts, sh.Pct)
			}
		}
	}
	// A write in flight (a renew, a register) moves no capacity: wait for
	// it, then check that nothing else did meanwhile.
	for _, e := range planned {
		if cur, ok := c.leases[e.lease.ID]; ok {
			c.waitWrittenLocked(cur)
		}
	}
	if !c.unchangedLocked(s, time.Now()) {
		return nil, false, nil
	}
	for _, e := range planned {
		cur, ok := c.leases[e.lease.ID]
		if !ok || cur.lease.Pct != e.lease.Pct || cur.lease.Revoked {
			return nil, false, nil
		}
	}
	gen := c.gen
	why := planWhy{
		op: "make room",
		throttle: fmt.Sprintf("to make room for job %s (weight %g) by joint allocation, which takes the leases' weighted throughput from %.3f to %.3f",
			d.Joint.Shares[len(d.Joint.Shares)-1].JobID, d.Joint.Shares[len(d.Joint.Shares)-1].Weight, d.Joint.Before, d.Joint.Utility),
		deadline: now.Add(c.cfg.ThrottleGrace),
	}
	events, err := c.applyPlan(ctx, planned, pcts, make([]bool, len(planned)), time.Now(), why)
	if err != nil {
		return events, false, err
	}
	// Each throttle applied moved gen once; any other move is someone
	// else's, and the allocation may no longer fit.
	return events, len(events) == len(planned) && c.gen == gen+uint64(len(events)), nil
}
