package mps

import (
	"errors"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
)

func TestParamValidate(t *testing.T) {
	t.Parallel()
	const uuid = "GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab"
	const mig = "MIG-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab"
	// Each valid parameter and the argument it becomes on the command line.
	for p, arg := range map[param]string{
		PID(1): "1", MaxPID: "4194304",
		Percentage(1): "1", Percentage(100): "100",
		PriorityNormal: "0", PriorityBelowNormal: "1",
		UID(0):     "0",
		UUID(uuid): uuid, UUID(mig): mig,
		DeviceIndex(0): "0", DeviceIndex(255): "255", DeviceUUID(uuid): uuid,
		MiB: "1M", 10 * GiB: "10240M",
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%T(%#v).Validate() = %v", p, p, err)
		} else if got := p.arg(); got != arg {
			t.Errorf("%T(%#v).arg() = %q, want %q", p, p, got, arg)
		}
	}
	for _, p := range []param{
		PID(0), PID(-5), MaxPID + 1,
		Percentage(0), Percentage(101),
		Priority(2),
		UID(-1),
		UUID("GPU-5a2c0f3e"), UUID(uuid + "\nquit"), UUID("GPU-5a2c0f3e-8b7d-4c1a-9e6f 0123456789ab"), UUID("GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789zz"),
		DeviceIndex(-1), DeviceIndex(256), DeviceUUID("GPU-1;quit"),
		MemLimit(0), MiB + 1, MaxMemLimit + MiB,
	} {
		if err := p.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%T(%#v).Validate() = %v, want ErrInvalidArgument", p, p, err)
		}
	}
}

func TestParseOutsideText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		parse func(string) error
		in    string
		ok    bool
	}{
		{name: "pid", parse: pidErr, in: "1234", ok: true},
		{name: "pid newline quit", parse: pidErr, in: "1234\nquit"},
		{name: "pid trailing newline", parse: pidErr, in: "1234\n"},
		{name: "pid quit", parse: pidErr, in: "quit"},
		{name: "pid sign", parse: pidErr, in: "+12"},
		{name: "pid space", parse: pidErr, in: " 12"},
		{name: "pid empty", parse: pidErr, in: ""},
		{name: "pid huge", parse: pidErr, in: "99999999999999999999"},
		{name: "percentage", parse: pctErr, in: "40", ok: true},
		{name: "percentage newline quit", parse: pctErr, in: "40\nquit"},
		{name: "percentage fraction", parse: pctErr, in: "40.5"},
		{name: "percentage 0", parse: pctErr, in: "0"},
		{name: "uuid", parse: uuidErr, in: "GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab", ok: true},
		{name: "uuid newline quit", parse: uuidErr, in: "GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab\nquit"},
		{name: "uuid quit", parse: uuidErr, in: "quit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.parse(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("parse(%q) = %v, want ok %v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("parse(%q) = %v, want ErrInvalidArgument", tt.in, err)
			}
		})
	}
}

func pidErr(s string) error  { _, err := ParsePID(s); return err }
func pctErr(s string) error  { _, err := ParsePercentage(s); return err }
func uuidErr(s string) error { _, err := ParseUUID(s); return err }

func TestSafeLine(t *testing.T) {
	t.Parallel()
	for _, line := range []string{"terminate_client 12 34", "set_default_device_pinned_mem_limit GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab 10M"} {
		if !safeLine(line) {
			t.Errorf("safeLine(%q) = false, want true", line)
		}
	}
	// Line breaks, a command separator, spacing the daemon does not
	// write, a NUL, nothing.
	for _, line := range []string{"ps\nquit", "ps\rquit", "ps;quit", "ps  -p 1", " ps", "ps\x00", ""} {
		if safeLine(line) {
			t.Errorf("safeLine(%q) = true, want false", line)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	bad := UUID("GPU-x\nquit")
	pct := Percentage(101)
	prio := Priority(3)
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{name: "relative pipe dir", edit: func(c *Config) { c.PipeDir = "pipe" }, field: "pipe_dir"},
		{name: "unclean log dir", edit: func(c *Config) { c.LogDir = "/var/log/../log" }, field: "log_dir"},
		{name: "bad device", edit: func(c *Config) { c.Device = bad }, field: "device"},
		{name: "bad default percentage", edit: func(c *Config) { c.Defaults.ActiveThreadPct = pct }, field: "active thread percentage"},
		{name: "bad default memory", edit: func(c *Config) { c.Defaults.PinnedMemLimit = 5 }, field: "pinned memory limit"},
		{name: "bad default priority", edit: func(c *Config) { c.Defaults.ClientPriority = &prio }, field: "client priority"},
		{name: "negative timeout", edit: func(c *Config) { c.CommandTimeout = -1 }, field: "command_timeout"},
		{name: "backoff max below first", edit: func(c *Config) { c.MaxRestartBackoff = c.RestartBackoff / 2 }, field: "max_restart_backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.edit(&cfg)
			fieldtest.WantText(t, cfg.Validate(), tt.field)
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
}

// The pinned-memory default names the GPU by UUID; a daemon of a MIG
// device sees that device alone, as device 0, and the default names it so.
func TestDefaultDevice(t *testing.T) {
	t.Parallel()
	for dev, want := range map[UUID]Device{
		"": DeviceIndex(0),
		"GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab": DeviceUUID("GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab"),
		"MIG-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab": DeviceIndex(0),
	} {
		if got := (Config{Device: dev}).defaultDevice(); got != want {
			t.Errorf("device %q: default for %+v, want %+v", dev, got, want)
		}
	}
}
