package configs

import (
	"fmt"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/predictor"
)

// ServiceSpecs loads each service's profile and returns the services as
// the admission controller takes them.
func (cfg *Config) ServiceSpecs() ([]admission.ServiceSpec, error) {
	var out []admission.ServiceSpec
	for i, sv := range cfg.Services {
		p, err := predictor.LoadProfile(sv.Profile)
		if err != nil {
			return nil, fmt.Errorf("services[%d].profile: %w", i, err)
		}
		spec := admission.ServiceSpec{Name: sv.Name, Profile: p, RateRPS: sv.RateRPS, SLOP99MS: sv.SLO.P99MS}
		if sv.IsEngine() {
			// An engine's load is its busy fraction: steps per second at
			// its solo step time; its SLO is on the step.
			spec.RateRPS = sv.Engine.Busy * 1e6 / p.SoloUS()
			spec.SLOP99MS, spec.BurstSteps = sv.SLO.StepP99MS, sv.Bursts()
		}
		out = append(out, spec)
	}
	return out, nil
}
