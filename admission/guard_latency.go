package admission

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/colocd/colocd/predictor"
)

// maxCorrection bounds an observed correction: a server a hundred times
// slower than predicted is over any SLO with or without training.
const maxCorrection = 100

// measure compares each service's observed p99 with the prediction for
// the leases that ran during the observed window, and keeps the ratio as
// the service's correction when the server was slower than predicted with
// 95 % confidence (ObservedWindow.P99SureMS, not the p99 of a window's
// luck)
// (ServiceSpec.Correction; 1 otherwise, the model is never loosened). Only
// a window that began after what runs on the GPU last changed counts
// (movedAt): one that saw two lease sets measures neither. The ratio is
// rounded up to its 5 % band, so that noise within a band changes nothing.
// It reports whether a correction changed; a change takes effect as a
// config change does (a decision on the old one does not commit).
func (g *guard) measure(ctx context.Context) (bool, error) {
	c := g.c
	lo, s, moved, ok := g.observedSnapshot()
	if !ok {
		return false, nil
	}
	// Only a lease set whose processes run as colocd knows them can be
	// measured: none awaiting a restart, each at the percentage its
	// workers were started at. A lease that never registered a process is
	// measured as not running: one launcher that renews but never
	// registers must not switch the correction off for the whole GPU, and
	// if its job does run, the server is slower than predicted for the
	// others, which corrects towards caution.
	trainers := make([]Trainer, 0, len(s.live))
	for _, e := range s.live {
		if e.lease.awaitingRestart() {
			return false, nil
		}
		if len(e.lease.PIDs) > 0 {
			trainers = append(trainers, Trainer{Profile: e.lease.Profile, Key: e.key, Pct: e.lease.running()})
		}
	}
	changed := false
	for i, svc := range s.pol.cfg.Services {
		win, ok := lo.ObservedWindow(svc.Name, moved)
		p99, since := win.P99MS, win.Since
		if !ok || !(p99 > 0) || math.IsInf(p99, 0) || since.Before(moved) {
			continue
		}
		lat, err := s.pol.predictor.PredictP99(ctx, s.pol.cfg.Services, i, trainers, s.pol.cfg.Mode)
		if err != nil {
			return changed, fmt.Errorf("predict %s for the observed window: %w", svc.Name, err)
		}
		sure := p99
		if v := win.P99SureMS; v > 0 && v < p99 {
			sure = v
		}
		corr := 1.0
		if r := sure / lat.P99MS; r > 1 && lat.P99MS > 0 {
			corr = min(maxCorrection, rateBand(r))
		}
		c.mu.Lock()
		if g.measured == nil {
			g.measured = map[string]Measurement{}
		}
		if len(trainers) > 0 {
			if g.coMeasured == nil {
				g.coMeasured = map[string]bool{}
			}
			g.coMeasured[svc.Name] = true
		}
		if c.cfg.Guard.LearnResponse && s.pol.cfg.Mode == predictor.ModeMPS && len(trainers) == 1 && len(s.live) == 1 && lat.P99MS > 0 && g.movedAt.Equal(moved) {
			if g.learned == nil {
				g.learned = learned{}
			}
			if g.learned.observe(svc.Name, trainers[0], trainers[0].Pct, p99/lat.P99MS, win, c.cfg.Guard.ResponseQuantile) {
				g.learnedGen++
				changed = true
				c.log.Info("learned the server's response", "service", svc.Name, "pct", trainers[0].Pct, "ratio", p99/lat.P99MS)
			}
		}
		if m := g.measured[svc.Name]; !m.Window.Since.Equal(since) {
			g.measured[svc.Name] = Measurement{Window: win, PredictedP99MS: lat.P99MS, RateRPS: svc.RateRPS, Mode: s.pol.cfg.Mode, Trainers: trainers, serviceKey: svc.profileKey(), burst: svc.BurstSteps}
		}
		if g.movedAt.Equal(moved) && g.corrections[svc.Name] != corr && (corr > 1 || g.corrections[svc.Name] > 1) {
			if corr < g.corrections[svc.Name] && len(trainers) == 0 {
				// The service alone was faster than the correction says:
				// that shows the model right for the service itself, not
				// for co-location, which is measured again before a new
				// job is granted more than its min_pct (guard_observed.go).
				delete(g.coMeasured, svc.Name)
			}
			if g.corrections == nil {
				g.corrections = map[string]float64{}
			}
			if corr > 1 {
				g.corrections[svc.Name] = corr
			} else {
				delete(g.corrections, svc.Name)
			}
			c.freedLocked() // a lower one frees capacity; either way decisions re-check
			changed = true
			c.log.Info("observed p99 corrects the prediction", "service", svc.Name, "observed_p99_ms", p99, "predicted_p99_ms", lat.P99MS, "correction", corr)
		}
		c.mu.Unlock()
	}
	return changed, nil
}

// observedSnapshot returns the latency observer, a snapshot of the leases
// and when what runs on the GPU last changed (movedAt), once what was
// measured of services no longer configured is forgotten; ok is false
// when the observer reports no latency.
func (g *guard) observedSnapshot() (lo LatencyObserver, s *snapshot, moved time.Time, ok bool) {
	c := g.c
	lo, ok = c.deps.Observer.(LatencyObserver)
	if !ok {
		return nil, nil, time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g.pruneLocked()
	return lo, c.snapshotLocked(), g.movedAt, true
}

// Measurement is one comparison of a server's observed p99 with the
// prediction for the leases that ran all through the observed window.
type Measurement struct {
	Window ObservedWindow
	// PredictedP99MS is the prediction at RateRPS (the rate the decisions
	// used) in Mode with Trainers, the leases at their percentages.
	PredictedP99MS float64
	RateRPS        float64
	Mode           predictor.Mode
	Trainers       []Trainer
	// serviceKey is the service's profile when measured, and burst its
	// engine burst (0: requests): a new profile, or a service that became
	// or stopped being an engine, drops the measurement and the correction
	// (a correction of request latencies says nothing of steps).
	serviceKey predictor.ProfileKey
	burst      float64
}

// Measurements returns the last measurement of each service, by name.
func (c *Controller) Measurements() map[string]Measurement {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.g.measured)
}

// pruneLocked forgets the corrections and measurements of services no
// longer configured, or whose profile or engine burst changed. c.mu is
// held.
func (g *guard) pruneLocked() {
	c := g.c
	type measuredAs struct {
		key   predictor.ProfileKey
		burst float64
	}
	keys := map[string]measuredAs{}
	for _, svc := range c.cfg.Services {
		keys[svc.Name] = measuredAs{svc.profileKey(), svc.BurstSteps}
	}
	for name := range g.corrections {
		if _, ok := keys[name]; !ok {
			delete(g.corrections, name)
			c.freedLocked()
		}
	}
	for name, m := range g.measured {
		if _, ok := keys[name]; !ok || (measuredAs{m.serviceKey, m.burst}) != keys[name] {
			delete(g.measured, name)
			delete(g.coMeasured, name)
			if g.corrections[name] > 0 && ok {
				delete(g.corrections, name)
				c.freedLocked()
			}
		}
	}
}

// Corrections returns the services' observed corrections (only those above
// 1), by service name.
func (c *Controller) Corrections() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.g.corrections)
}
