package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/colocd/colocd/predictor"
)

// plan is what a re-plan of the live leases says, lease by lease in the
// order of those planned for: each one's new percentage and whether it is
// revoked; note says how they were lowered when that was by joint
// allocation ("" otherwise).
type plan struct {
	pcts    []int
	revoked []bool
	note    string
}

// replan re-plans the live leases against the policy's config (the SLOs,
// loads and corrections of the moment): by the rule of UpdateServices,
// or by joint allocation where that only lowers leases and does better
// (jointLower).
func (pol *policy) replan(ctx context.Context, live []liveLease) (plan, error) {
	pcts, revoked, err := pol.replanBy(ctx, live)
	if err != nil || slices.Contains(revoked, true) || slices.Equal(pcts, currentPcts(live)) {
		return plan{pcts: pcts, revoked: revoked}, err
	}
	// Lowering is enough: share what is left jointly when that applies.
	jp, note, err := pol.jointLower(ctx, live, pcts)
	switch {
	case err == nil:
		return plan{pcts: jp, revoked: revoked, note: note}, nil
	case errors.Is(err, errNotJoint):
		return plan{pcts: pcts, revoked: revoked}, nil
	default:
		return plan{}, err
	}
}

// replanBy is replan by the rule of UpdateServices.
func (pol *policy) replanBy(ctx context.Context, live []liveLease) ([]int, []bool, error) {
	pcts := currentPcts(live)
	revoked := make([]bool, len(live))
	eval := func(ctx context.Context, pcts []int) (probe, error) {
		var ts []Trainer
		for i, e := range live {
			if !revoked[i] {
				ts = append(ts, Trainer{Profile: e.lease.Profile, Key: e.key, Pct: pcts[i]})
			}
		}
		_, p, err := pol.predictAll(ctx, ts)
		return p, err
	}
	if p, err := eval(ctx, pcts); p.fits || err != nil {
		return pcts, revoked, err
	}
	order := victimOrder(live)
	if pol.cfg.Mode == predictor.ModeMPS {
		for _, i := range order {
			if live[i].lease.Revoked {
				continue
			}
			grid := pctGrid(max(live[i].lease.MinPct, 1), pcts[i], pol.cfg.PctStep)
			best, err := searchGrid(ctx, grid, pol.cfg.SearchWorkers, func(ctx context.Context, k int) (probe, error) {
				trial := slices.Clone(pcts)
				trial[i] = grid[k]
				return eval(ctx, trial)
			}, nil)
			if err != nil {
				return nil, nil, err
			}
			if best >= 0 {
				pcts[i] = grid[best]
				return pcts, revoked, nil
			}
			pcts[i] = grid[0]
		}
	}
	for _, i := range order {
		if live[i].lease.Revoked {
			continue
		}
		revoked[i] = true
		if p, err := eval(ctx, pcts); p.fits || err != nil {
			return pcts, revoked, err
		}
	}
	return pcts, revoked, nil
}

// jointLower lowers the live leases to what fits by joint allocation, each
// between its min_pct and its percentage, valued at weight × throughput,
// when the rule of UpdateServices would only lower (to byRule, not
// revoke), two or more leases may go down, and they share one
// job.priority (priorities are a strict order, which the rule keeps;
// weights share within one). Any lowering the SLOs need is made, whatever
// Config.MinMovePct. It gives up (errNotJoint: the rule's plan stands)
// when that does not hold, when the allocation is worth no more weighted
// throughput than the rule's plan, when the predictor gives no throughput,
// or when the allocation takes longer than jointBudget.
func (pol *policy) jointLower(ctx context.Context, live []liveLease, byRule []int) ([]int, string, error) {
	if pol.cfg.Mode != predictor.ModeMPS {
		return nil, "", errNotJoint
	}
	ts := make([]Trainer, len(live))
	jobs := make([]jointJob, len(live))
	n := 0
	priority, seen := 0, false
	for i, e := range live {
		l := &e.lease
		ts[i] = Trainer{Profile: l.Profile, Key: e.key}
		jobs[i] = jointJob{weight: pol.weight(l.Weight), grid: []int{l.Pct}, memoryMiB: l.MemoryMiB}
		if l.Revoked {
			continue
		}
		if seen && l.Priority != priority {
			return nil, "", errNotJoint
		}
		priority, seen = l.Priority, true
		if low := min(max(l.MinPct, 1), l.Pct); low < l.Pct {
			jobs[i].grid = pctGrid(low, l.Pct, pol.cfg.PctStep)
			n++
		}
	}
	if n < 2 {
		return nil, "", errNotJoint
	}
	plan, rule, err := pol.allocateLive(ctx, ts, jobs, byRule) // rule: cached, the rule's last prediction
	switch {
	case err == nil:
	case errors.Is(err, errNoThroughput), errors.Is(err, errJointInfeasible), errors.Is(err, errNotJoint):
		return nil, "", errNotJoint
	default:
		return nil, "", err
	}
	if ru := utility(jobs, rule); !(plan.utility > ru*(1+1e-9)) {
		return nil, "", errNotJoint
	}
	return plan.pcts, fmt.Sprintf("what is left was shared by joint allocation among %d leases (%s): a weighted throughput of %.3f, against %.3f by lowering the newest first",
		len(live), sloPrice(plan.prices.SLO), plan.utility, utility(jobs, rule)), nil
}

// victimOrder is the order in which a re-plan lowers or revokes leases:
// lowest job priority first, then newest first.
func victimOrder(live []liveLease) []int {
	order := make([]int, len(live))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		la, lb := &live[a].lease, &live[b].lease
		return cmp.Or(cmp.Compare(la.Priority, lb.Priority), lb.CreatedAt.Compare(la.CreatedAt), cmp.Compare(lb.ID, la.ID))
	})
	return order
}
