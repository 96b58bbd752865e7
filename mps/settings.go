package mps

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"github.com/colocd/colocd/field"
)

// SimControl is the Settings.Control value that selects the built-in
// simulated daemon (Sim) instead of a control program.
const SimControl = "sim"

// DefaultControl is NVIDIA's control program, the default of Control.
const DefaultControl = "nvidia-cuda-mps-control"

// MaxCommandTimeout bounds Settings.CommandTimeout.
const MaxCommandTimeout = 10 * time.Minute

// Settings are the mps section of colocd's configuration file: what an
// operator chooses for the daemon of one GPU (docs/mps.md). Config is what
// Control runs with; Settings.Config makes it, adding what only the caller
// knows (the device) and the timings no operator needs to set.
type Settings struct {
	// Control is the control program, a path or a name in PATH, or
	// SimControl for the built-in simulated daemon (see Simulated).
	Control string `mapstructure:"control"`
	// PipeDir is CUDA_MPS_PIPE_DIRECTORY, shared with every client.
	PipeDir string `mapstructure:"pipe_dir"`
	// LogDir is CUDA_MPS_LOG_DIRECTORY.
	LogDir string `mapstructure:"log_dir"`
	// ManageDaemon lets colocd start a daemon when none runs and restart
	// one it started; off, colocd only attaches.
	ManageDaemon bool `mapstructure:"manage_daemon"`
	// DefaultActiveThreadPct is set_default_active_thread_percentage.
	DefaultActiveThreadPct int `mapstructure:"default_active_thread_pct"`
	// PinnedMemLimitMiB is set_default_device_pinned_mem_limit for the
	// GPU; 0 leaves the daemon's value.
	PinnedMemLimitMiB int `mapstructure:"pinned_mem_limit_mib"`
	// ClientPriority is set_default_client_priority: 0 normal, 1 below
	// normal.
	ClientPriority int `mapstructure:"client_priority"`
	// QuitOnClose quits, on shutdown, a daemon this colocd started.
	QuitOnClose bool `mapstructure:"quit_on_close"`
	// CommandTimeout bounds one control command.
	CommandTimeout time.Duration `mapstructure:"command_timeout"`
}

// DefaultSettings are the documented defaults: NVIDIA's program and
// directories, a daemon colocd may start, every new client at 100 %.
func DefaultSettings() Settings {
	return Settings{
		Control:                DefaultControl,
		PipeDir:                "/tmp/nvidia-mps",
		LogDir:                 "/var/log/nvidia-mps",
		ManageDaemon:           true,
		DefaultActiveThreadPct: 100,
		CommandTimeout:         10 * time.Second,
	}
}

// Validate names every bad key (mps.control, mps.pipe_dir, …) in a
// *field.List.
func (s Settings) Validate() error {
	var c field.Checker
	if s.Control == "" {
		c.Add("mps.control", `"sim", a program name in PATH or a path`, `""`)
	}
	for _, d := range []struct{ key, path string }{{"mps.pipe_dir", s.PipeDir}, {"mps.log_dir", s.LogDir}} {
		if !filepath.IsAbs(d.path) || filepath.Clean(d.path) != d.path {
			c.Add(d.key, "a clean absolute path", quote(d.path))
		}
	}
	intIn := func(key string, v, lo, hi int, want string) {
		if v < lo || v > hi {
			c.Add(key, want, strconv.Itoa(v))
		}
	}
	intIn("mps.default_active_thread_pct", s.DefaultActiveThreadPct, 1, 100, "a percentage from 1 to 100")
	intIn("mps.pinned_mem_limit_mib", s.PinnedMemLimitMiB, 0, math.MaxInt32, "0 (no limit) or a size in MiB")
	intIn("mps.client_priority", s.ClientPriority, 0, 1, "0 (normal) or 1 (below normal)")
	if s.CommandTimeout <= 0 || s.CommandTimeout > MaxCommandTimeout {
		c.Add("mps.command_timeout", fmt.Sprintf("a duration above 0 and at most %v", MaxCommandTimeout), s.CommandTimeout.String())
	}
	return c.Err("mps settings")
}

// Simulated reports whether the daemon is the built-in simulated one,
// given whether the GPU is simulated: SimControl always is; the default
// program is exactly when the GPU is, so that one file works with and
// without a GPU; any other program (a path to a fake control binary, say)
// is always run.
func (s Settings) Simulated(gpuSimulated bool) bool {
	switch s.Control {
	case SimControl:
		return true
	case DefaultControl:
		return gpuSimulated
	}
	return false
}

// Defaults are the daemon-wide defaults the settings ask for.
func (s Settings) Defaults() Defaults {
	prio := Priority(s.ClientPriority)
	return Defaults{
		ActiveThreadPct: Percentage(s.DefaultActiveThreadPct),
		PinnedMemLimit:  MemLimit(s.PinnedMemLimitMiB) * MiB,
		ClientPriority:  &prio,
	}
}

// Config is the Control configuration of the daemon of device: the
// settings over DefaultConfig's timings.
func (s Settings) Config(device UUID) Config {
	c := DefaultConfig()
	c.Binary, c.PipeDir, c.LogDir, c.Device = s.Control, s.PipeDir, s.LogDir, device
	c.Manage, c.QuitOnClose, c.Defaults = s.ManageDaemon, s.QuitOnClose, s.Defaults()
	if s.CommandTimeout > 0 {
		c.CommandTimeout = s.CommandTimeout
	}
	return c
}
