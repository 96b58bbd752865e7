package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// revokeBroken ends the SLO being broken where nothing is left to
// throttle: when a service's observed p99, over a window that began after
// what runs on the GPU last changed, is over its SLO with 95 % confidence
// (ObservedWindow.P99SureMS) while every co-located lease runs at its
// min_pct, it revokes the lease of lowest priority, newest first, with the
// guard's deadline, at once: Guard.RevokeAfter and the revoke budget hold
// back revokes for a predicted shortage only. One lease at a time: the
// next is judged on a window that began after this one stopped. A lease
// above its min_pct is the re-plan's to throttle first.
func (g *guard) revokeBroken(ctx context.Context) ([]Event, error) {
	c := g.c
	lo, s, moved, ok := g.observedSnapshot()
	if !ok || len(s.live) == 0 {
		return nil, nil
	}
	for _, e := range s.live {
		l := &e.lease
		if l.Revoked || l.awaitingRestart() || len(l.PIDs) == 0 || l.running() > max(l.MinPct, 1) {
			return nil, nil // something is stopping, restarting, not yet running or may still be throttled
		}
	}
	broken := ""
	for _, svc := range s.pol.cfg.Services {
		win, ok := lo.ObservedWindow(svc.Name, moved)
		if !ok || win.Since.Before(moved) {
			continue
		}
		sure := win.P99MS
		if v := win.P99SureMS; v > 0 && v < sure {
			sure = v
		}
		if sure > svc.SLOP99MS && !math.IsInf(sure, 0) {
			broken = fmt.Sprintf("service %s's observed p99 is %.1f ms (at least %.1f ms with 95 %% confidence) over its %g ms SLO with every training job at its min_pct",
				svc.Name, win.P99MS, sure, svc.SLOP99MS)
			break
		}
	}
	if broken == "" {
		return nil, nil
	}
	victim := victimOrder(s.live)[0]
	p := plan{pcts: currentPcts(s.live), revoked: make([]bool, len(s.live))}
	p.revoked[victim] = true
	c.mu.Lock()
	now := c.now()
	if !c.unchangedLocked(s, now) {
		c.mu.Unlock()
		return nil, nil // the next check judges what runs now
	}
	g.holds.revoked(now)
	events, serr := c.applyPlan(ctx, s.live, p, now, planWhy{
		op: "revoke for a broken SLO", revoke: broken + ": the job of lowest priority, newest first, must stop",
		deadline: now.Add(c.cfg.Guard.Deadline)})
	c.mu.Unlock()
	c.signal()
	perr := c.publish(ctx, events)
	if len(events) > 0 {
		c.log.Warn("observed p99 over the slo at min_pct: lease revoked", "lease", s.live[victim].lease.ID)
	}
	return events, errors.Join(serr, perr)
}
