package mps

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"
)

// Config says how Control finds, starts and watches the control daemon of
// one GPU. New fills zero strings and durations with DefaultConfig's values;
// booleans are taken as given.
type Config struct {
	// Binary is the control program, a path or a name looked up in PATH.
	Binary string
	// PipeDir is CUDA_MPS_PIPE_DIRECTORY: one per GPU, shared with clients.
	PipeDir string
	// LogDir is CUDA_MPS_LOG_DIRECTORY, where control.log and server.log are.
	LogDir string
	// Device is the GPU. A daemon colocd starts gets CUDA_VISIBLE_DEVICES set
	// to it and sees only it; the pinned memory default is set for it. Empty:
	// CUDA_VISIBLE_DEVICES is not set and the default goes to device 0.
	Device UUID
	// Manage lets Ensure start a daemon when none runs, and the health loop
	// restart a daemon colocd started. Off: colocd only attaches.
	Manage bool
	// Supervise starts the daemon in the foreground (-f) as colocd's child
	// instead of in the background (-d).
	Supervise bool
	// QuitOnClose makes Close quit a daemon that this colocd started. Off by
	// default: an inference server depends on the daemon. A daemon colocd
	// did not start is never quit.
	QuitOnClose bool
	// Defaults are applied by Ensure and after every restart.
	Defaults Defaults
	// CommandTimeout bounds one control command.
	CommandTimeout time.Duration
	// ProbeInterval is the time between two health probes.
	ProbeInterval time.Duration
	// ProbeTimeout bounds each command of a health probe.
	ProbeTimeout time.Duration
	// StartTimeout bounds the wait for a daemon to answer after its start.
	StartTimeout time.Duration
	// RestartBackoff is the first delay between two restart attempts; each
	// failure doubles it up to MaxRestartBackoff.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// ProcDir is the proc file system the servers' users are read from
	// (/proc/<server pid>/status). Empty: /proc.
	ProcDir string
	// Logger is used by Run only. Nil discards.
	Logger *slog.Logger
}

// Defaults are daemon-wide settings for servers and clients created after
// they are set. A zero field leaves the daemon's own value alone.
type Defaults struct {
	// ActiveThreadPct: set_default_active_thread_percentage. 0: leave.
	ActiveThreadPct Percentage
	// PinnedMemLimit: set_default_device_pinned_mem_limit for Config.Device
	// (device 0 when Device is empty). 0: leave.
	PinnedMemLimit MemLimit
	// ClientPriority: set_default_client_priority. Nil: leave.
	ClientPriority *Priority
}

// Validate checks every set field.
func (d Defaults) Validate() error {
	if d.ActiveThreadPct != 0 {
		if err := d.ActiveThreadPct.Validate(); err != nil {
			return fmt.Errorf("defaults: %w", err)
		}
	}
	if d.PinnedMemLimit != 0 {
		if err := d.PinnedMemLimit.Validate(); err != nil {
			return fmt.Errorf("defaults: %w", err)
		}
	}
	if d.ClientPriority != nil {
		if err := d.ClientPriority.Validate(); err != nil {
			return fmt.Errorf("defaults: %w", err)
		}
	}
	return nil
}

// DefaultConfig returns the documented defaults: NVIDIA's default pipe and
// log directories, a managed daemon started with -d, and timeouts that let a
// healthy daemon answer under load while a hung one is noticed in seconds.
func DefaultConfig() Config {
	s := DefaultSettings()
	return Config{
		Binary:            s.Control,
		PipeDir:           s.PipeDir,
		LogDir:            s.LogDir,
		Manage:            s.ManageDaemon,
		CommandTimeout:    s.CommandTimeout,
		ProbeInterval:     5 * time.Second,
		ProbeTimeout:      3 * time.Second,
		StartTimeout:      30 * time.Second,
		RestartBackoff:    time.Second,
		MaxRestartBackoff: time.Minute,
	}
}

// withDefaults fills the zero strings and durations.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.Binary, d.Binary)
	set(&c.PipeDir, d.PipeDir)
	set(&c.LogDir, d.LogDir)
	setD(&c.CommandTimeout, d.CommandTimeout)
	setD(&c.ProbeInterval, d.ProbeInterval)
	setD(&c.ProbeTimeout, d.ProbeTimeout)
	setD(&c.StartTimeout, d.StartTimeout)
	setD(&c.RestartBackoff, d.RestartBackoff)
	setD(&c.MaxRestartBackoff, d.MaxRestartBackoff)
	return c
}

// Validate checks the config after defaults were filled, naming the field.
func (c Config) Validate() error {
	for _, f := range []struct{ name, path string }{{"pipe_dir", c.PipeDir}, {"log_dir", c.LogDir}} {
		if !filepath.IsAbs(f.path) || filepath.Clean(f.path) != f.path {
			return fmt.Errorf("mps config: %s: want a clean absolute path, got %s", f.name, quote(f.path))
		}
	}
	if c.Device != "" {
		if err := c.Device.Validate(); err != nil {
			return fmt.Errorf("mps config: device: %w", err)
		}
	}
	if err := c.Defaults.Validate(); err != nil {
		return fmt.Errorf("mps config: %w", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"command_timeout", c.CommandTimeout}, {"probe_interval", c.ProbeInterval},
		{"probe_timeout", c.ProbeTimeout}, {"start_timeout", c.StartTimeout},
		{"restart_backoff", c.RestartBackoff}, {"max_restart_backoff", c.MaxRestartBackoff},
	} {
		if d.v <= 0 {
			return fmt.Errorf("mps config: %s: want a duration > 0, got %v", d.name, d.v)
		}
	}
	if c.MaxRestartBackoff < c.RestartBackoff {
		return fmt.Errorf("mps config: max_restart_backoff: want ≥ restart_backoff (%v), got %v", c.RestartBackoff, c.MaxRestartBackoff)
	}
	return nil
}

// defaultDevice is the device the pinned memory default is set for. A
// daemon for a MIG device sees that device alone, as device 0 (it starts
// with CUDA_VISIBLE_DEVICES set to it), which its clients' limits name too.
func (c Config) defaultDevice() Device {
	if c.Device != "" && !strings.HasPrefix(string(c.Device), "MIG-") {
		return DeviceUUID(c.Device)
	}
	return DeviceIndex(0)
}
