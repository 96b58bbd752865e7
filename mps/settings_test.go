package mps

import (
	"errors"
	"testing"

	"github.com/colocd/colocd/field"
)

func TestSettingsSimulated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		control      string
		gpuSimulated bool
		want         bool
	}{
		{"default control, real GPU", DefaultControl, false, false},
		{"default control, simulated GPU", DefaultControl, true, true},
		{"sim, real GPU", SimControl, false, true},
		{"sim, simulated GPU", SimControl, true, true},
		{"fake binary, simulated GPU", "/tmp/fake/nvidia-cuda-mps-control", true, false},
		{"other name, real GPU", "my-mps-control", false, false},
	}
	for _, tt := range tests {
		s := DefaultSettings()
		s.Control = tt.control
		if got := s.Simulated(tt.gpuSimulated); got != tt.want {
			t.Errorf("%s: Simulated(%v) = %v, want %v", tt.name, tt.gpuSimulated, got, tt.want)
		}
	}
}

// TestSettingsConfig: the settings reach Control's configuration, and the
// defaults are one set (DefaultConfig takes the settings' own).
func TestSettingsConfig(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	if err := s.Validate(); err != nil {
		t.Fatalf("DefaultSettings().Validate() = %v", err)
	}
	def := DefaultConfig()
	if def.Binary != s.Control || def.PipeDir != s.PipeDir || def.LogDir != s.LogDir || def.CommandTimeout != s.CommandTimeout || def.Manage != s.ManageDaemon {
		t.Errorf("DefaultConfig() = %+v, disagrees with DefaultSettings() = %+v", def, s)
	}
	s.PipeDir, s.ManageDaemon, s.QuitOnClose, s.DefaultActiveThreadPct, s.PinnedMemLimitMiB, s.ClientPriority = "/run/mps-1", false, true, 40, 2048, 1
	c := s.Config(testUUID)
	if c.PipeDir != "/run/mps-1" || c.Manage || !c.QuitOnClose || c.Device != testUUID {
		t.Errorf("Config() = %+v, want the settings' pipe dir, manage off, quit on close, the device", c)
	}
	if d := c.Defaults; d.ActiveThreadPct != 40 || d.PinnedMemLimit != 2*GiB || d.ClientPriority == nil || *d.ClientPriority != 1 {
		t.Errorf("Config().Defaults = %+v, want 40 %%, 2 GiB, priority 1", d)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Config().Validate() = %v", err)
	}
}

func TestSettingsValidateNamesEachKey(t *testing.T) {
	t.Parallel()
	s := Settings{PipeDir: "rel", LogDir: "/a/../b", DefaultActiveThreadPct: 0, PinnedMemLimitMiB: -1, ClientPriority: 2}
	err := s.Validate()
	var l *field.List
	if !errors.As(err, &l) {
		t.Fatalf("Validate() = %v, want a *field.List", err)
	}
	got := map[string]bool{}
	for _, e := range l.Errors {
		got[e.Path] = true
	}
	for _, k := range []string{"mps.control", "mps.pipe_dir", "mps.log_dir", "mps.default_active_thread_pct", "mps.pinned_mem_limit_mib", "mps.client_priority", "mps.command_timeout"} {
		if !got[k] {
			t.Errorf("Validate() = %v: no problem for %s", err, k)
		}
	}
}
