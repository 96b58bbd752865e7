package mps

import (
	"errors"
	"testing"

	"github.com/colocd/colocd/field"
)

func TestSettingsSimulated(t *testing.T) {
	t.Parallel()
	// Per control program: Simulated with a real GPU, and with a simulated
	// one.
	for control, want := range map[string][2]bool{
		DefaultControl:                      {false, true},
		SimControl:                          {true, true},
		"/tmp/fake/nvidia-cuda-mps-control": {false, false},
		"my-mps-control":                    {false, false},
	} {
		s := DefaultSettings()
		s.Control = control
		for i, gpuSimulated := range []bool{false, true} {
			if got := s.Simulated(gpuSimulated); got != want[i] {
				t.Errorf("control %q: Simulated(%v) = %v, want %v", control, gpuSimulated, got, want[i])
			}
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
