package admission

import (
	"context"
	"slices"
)

// Guard re-plans the live leases when a service's observed load has moved
// to another band since the last plan (observed.go): a load above the
// configured rate lowers leases (throttle events with a deadline) or
// revokes them, newest first, by the rule of UpdateServices; a load back
// under it changes nothing, since a plan never raises a lease. Call it
// often (each second): when no band moved it predicts nothing.
func (c *Controller) Guard(ctx context.Context) ([]Event, error) {
	c.mu.Lock()
	rates := rateList(c.observedServices(c.cfg.Services))
	same := slices.Equal(rates, c.guarded)
	c.mu.Unlock()
	if same {
		return nil, nil
	}
	events, err := c.replanLive(ctx, "as the inference server's observed load rose")
	if err != nil {
		return events, err
	}
	c.mu.Lock()
	c.guarded = rates
	c.mu.Unlock()
	if len(events) > 0 {
		c.log.Info("observed load moved: leases re-planned", "events", len(events))
	}
	return events, nil
}

func rateList(services []ServiceSpec) []float64 {
	out := make([]float64, len(services))
	for i, s := range services {
		out[i] = s.RateRPS
	}
	return out
}
