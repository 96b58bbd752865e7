package mps

import (
	"errors"
	"testing"

	"github.com/colocd/colocd/internal/fieldtest"
)

func TestParamValidate(t *testing.T) {
	t.Parallel()
	const uuid = "GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab"
	tests := []struct {
		name string
		p    param
		ok   bool
		arg  string
	}{
		{name: "pid 1", p: PID(1), ok: true, arg: "1"},
		{name: "pid max", p: MaxPID, ok: true, arg: "4194304"},
		{name: "pid 0", p: PID(0)},
		{name: "pid negative", p: PID(-5)},
		{name: "pid too large", p: MaxPID + 1},
		{name: "percentage 1", p: Percentage(1), ok: true, arg: "1"},
		{name: "percentage 100", p: Percentage(100), ok: true, arg: "100"},
		{name: "percentage 0", p: Percentage(0)},
		{name: "percentage 101", p: Percentage(101)},
		{name: "priority normal", p: PriorityNormal, ok: true, arg: "0"},
		{name: "priority below normal", p: PriorityBelowNormal, ok: true, arg: "1"},
		{name: "priority 2", p: Priority(2)},
		{name: "uid root", p: UID(0), ok: true, arg: "0"},
		{name: "uid -1", p: UID(-1)},
		{name: "uuid", p: UUID(uuid), ok: true, arg: uuid},
		{name: "uuid mig", p: UUID("MIG-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab"), ok: true, arg: "MIG-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab"},
		{name: "uuid short", p: UUID("GPU-5a2c0f3e")},
		{name: "uuid newline quit", p: UUID(uuid + "\nquit")},
		{name: "uuid space", p: UUID("GPU-5a2c0f3e-8b7d-4c1a-9e6f 0123456789ab")},
		{name: "uuid not hex", p: UUID("GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789zz")},
		{name: "device 0", p: DeviceIndex(0), ok: true, arg: "0"},
		{name: "device 255", p: DeviceIndex(255), ok: true, arg: "255"},
		{name: "device -1", p: DeviceIndex(-1)},
		{name: "device 256", p: DeviceIndex(256)},
		{name: "device uuid", p: DeviceUUID(uuid), ok: true, arg: uuid},
		{name: "device bad uuid", p: DeviceUUID("GPU-1;quit")},
		{name: "mem 1 MiB", p: MiB, ok: true, arg: "1M"},
		{name: "mem 10 GiB", p: 10 * GiB, ok: true, arg: "10240M"},
		{name: "mem 0", p: MemLimit(0)},
		{name: "mem not MiB multiple", p: MiB + 1},
		{name: "mem too large", p: MaxMemLimit + MiB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Validate() = %v, want ErrInvalidArgument", err)
			}
			if tt.ok && tt.p.arg() != tt.arg {
				t.Fatalf("arg() = %q, want %q", tt.p.arg(), tt.arg)
			}
		})
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
