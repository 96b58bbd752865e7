package gpu

import (
	"errors"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/fieldtest"
)

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		mutate     func(c *Config)
		wantFields []string // nil: valid
	}{
		{name: "sim", mutate: func(c *Config) { c.Backend = BackendSim }},
		{name: "nvml by uuid", mutate: func(c *Config) {
			c.Backend, c.Device = BackendNVML, "GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40"
		}},
		{name: "nvml ignores the sim section", mutate: func(c *Config) { c.Backend, c.Sim.Name = BackendNVML, "" }},
		{name: "override and wait", mutate: func(c *Config) { c.SMs, c.EventWait = 80, 5*time.Second }},
		{name: "unknown backend", mutate: func(c *Config) { c.Backend = "cuda" }, wantFields: []string{"gpu.backend"}},
		{name: "empty backend", mutate: func(c *Config) { c.Backend = "" }, wantFields: []string{"gpu.backend"}},
		{name: "bad device", mutate: func(c *Config) { c.Device = "first" }, wantFields: []string{"gpu.device"}},
		{name: "mig device", mutate: func(c *Config) { c.Device = "MIG-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40" }},
		{name: "mig device by instance ids", mutate: func(c *Config) { c.Device = "0:1:0" }},
		{name: "bad mig device", mutate: func(c *Config) { c.Device = "0:1" }, wantFields: []string{"gpu.device"}},
		{name: "negative sms", mutate: func(c *Config) { c.SMs = -1 }, wantFields: []string{"gpu.sms"}},
		{name: "huge sms", mutate: func(c *Config) { c.SMs = MaxSMs + 1 }, wantFields: []string{"gpu.sms"}},
		{name: "negative wait", mutate: func(c *Config) { c.EventWait = -time.Second }, wantFields: []string{"gpu.event_wait"}},
		{name: "long wait", mutate: func(c *Config) { c.EventWait = 2 * time.Minute }, wantFields: []string{"gpu.event_wait"}},
		{name: "empty sim name", mutate: func(c *Config) { c.Sim.Name = "" }, wantFields: []string{"gpu.sim.name"}},
		{name: "control character in sim name", mutate: func(c *Config) { c.Sim.Name = "NVIDIA\nH200" }, wantFields: []string{"gpu.sim.name"}},
		{name: "huge sim memory", mutate: func(c *Config) { c.Sim.MemoryMiB = MaxSimMemoryMiB + 1 }, wantFields: []string{"gpu.sim.memory_mib"}},
		{
			name:       "every problem at once",
			mutate:     func(c *Config) { c.Backend, c.Device, c.SMs, c.Sim.Name = "x", "", -5, "" },
			wantFields: []string{"gpu.backend", "gpu.device", "gpu.sms", "gpu.sim.name"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantFields != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v, want ErrInvalidConfig", err)
			}
			fieldtest.WantPaths(t, err, tt.wantFields...)
		})
	}
}

func TestConfigErrorText(t *testing.T) {
	t.Parallel()
	err := Config{Backend: "cuda", Device: "0", Sim: SimConfig{Name: "x"}}.Validate()
	want := `invalid gpu configuration: gpu.backend: want one of auto, nvml, sim, got "cuda"`
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}
