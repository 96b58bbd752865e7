package sidecar

import (
	"math"
	"testing"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/predictor"
)

// An engine's config becomes admission's service at its busy fraction's
// step rate, with its burst and its step SLO.
func TestServiceSpecsEngine(t *testing.T) {
	t.Parallel()
	const profile = "../testdata/profiles/mi300x-vllm-decode-step.json"
	cfg := configs.Default()
	cfg.Services = []configs.Service{
		{Name: "llama", Profile: profile, Engine: configs.Engine{Busy: 0.5}, SLO: configs.SLO{StepP99MS: 15}},
		{Name: "bert", Profile: profile, RateRPS: 20, SLO: configs.SLO{P99MS: 100}},
	}
	specs, err := cfg.ServiceSpecs()
	if err != nil {
		t.Fatal(err)
	}
	p, err := predictor.LoadProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	eng, req := specs[0], specs[1]
	if want := 0.5 * 1e6 / p.SoloUS(); math.Abs(eng.RateRPS-want) > 1e-9 || eng.BurstSteps != configs.DefaultBurstSteps || eng.SLOP99MS != 15 {
		t.Errorf("engine spec: %.3f steps/s, burst %g, SLO %g; want %.3f, %d, 15", eng.RateRPS, eng.BurstSteps, eng.SLOP99MS, want, configs.DefaultBurstSteps)
	}
	if req.RateRPS != 20 || req.BurstSteps != 0 || req.SLOP99MS != 100 {
		t.Errorf("request spec: %+v", req)
	}
}
