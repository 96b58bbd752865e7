package configs

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/colocd/colocd/field"
)

// An engine service loads from YAML with its busy fraction, burst and step
// SLO; a request SLO on it is reported at its line.
func TestLoadEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yaml := fmt.Sprintf("services:\n  - name: llama\n    profile: %s\n    engine: {busy: 0.6, burst_steps: 64}\n    slo: {step_p99_ms: 40}\n", absPath(t, inferenceProfile))
	c := mustLoad(t, writeFile(t, filepath.Join(dir, "ok.yaml"), yaml))
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.Services[0]
	if !s.IsEngine() || s.Engine.Busy != 0.6 || s.Bursts() != 64 || s.SLO.StepP99MS != 40 || s.RateRPS != 0 {
		t.Errorf("loaded %+v", s)
	}
	s.Engine.BurstSteps = 0
	if s.Bursts() != DefaultBurstSteps {
		t.Errorf("default burst %g, want %d", s.Bursts(), DefaultBurstSteps)
	}
	bad := yaml + "    rate_rps: 5\n"
	c, err := Load(writeFile(t, filepath.Join(dir, "bad.yaml"), bad))
	if err == nil {
		err = c.Validate()
	}
	var ve *field.List
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Path != "services[0].rate_rps" || ve.Errors[0].Line != 6 {
		t.Errorf("got %v, want services[0].rate_rps at line 6", err)
	}
}
