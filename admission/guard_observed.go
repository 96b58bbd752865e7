package admission

import (
	"math"
	"slices"
)

// rateStep is the ratio between two observed-rate bands: a decision
// predicts at the band above the observed rate, so that rates within 5 % of
// each other share one cached prediction and a new prediction is made only
// when the load leaves its band.
const rateStep = 1.05

// rateBand is the smallest band rateStep^k (k a whole number) at or above r.
func rateBand(r float64) float64 {
	k := math.Ceil(math.Log(r)/math.Log(rateStep) - 1e-9)
	return math.Pow(rateStep, k)
}

// observedServices returns services with each one's rate raised to its
// observed band when the server reports more load than configured, and its
// observed correction (guard_latency.go). A lower observed rate is used
// only with Guard.PlanBelowConfigured: a lease granted on it needs the
// guard to throttle it when load returns. c.mu is held.
func (g *guard) observedServices(services []ServiceSpec) []ServiceSpec {
	c := g.c
	out := services
	for i, s := range services {
		if corr := g.corrections[s.Name]; corr > 1 {
			if &out[0] == &services[0] {
				out = slices.Clone(services)
			}
			out[i].Correction = corr
		}
	}
	if c.deps.Observer == nil {
		return out
	}
	lo, latency := c.deps.Observer.(LatencyObserver)
	for i, s := range services {
		if latency && !c.cfg.Guard.GrantBeforeMeasured && !g.coMeasured[s.Name] && lo.Watches(s.Name) {
			if &out[0] == &services[0] {
				out = slices.Clone(services)
			}
			out[i].Unmeasured = true
		}
		rps, ok := c.deps.Observer.ObservedRate(s.Name)
		if !ok || !(rps > 0) || math.IsInf(rps, 0) || rps == s.RateRPS || rps < s.RateRPS && !c.cfg.Guard.PlanBelowConfigured {
			continue
		}
		if &out[0] == &services[0] {
			out = slices.Clone(services)
		}
		if rps > s.RateRPS {
			out[i].RateRPS = max(s.RateRPS, rateBand(rps))
		} else {
			out[i].RateRPS = min(s.RateRPS, rateBand(rps))
		}
	}
	return out
}
