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
		if sv.IsEngine() { // its SLO is on the step
			spec = admission.EngineService(sv.Name, p, sv.Engine.Busy, sv.Bursts(), sv.SLO.StepP99MS)
		}
		out = append(out, spec)
	}
	return out, nil
}
