package gpu

import (
	"fmt"
	"strconv"
	"time"
	"unicode"

	"github.com/colocd/colocd/field"
)

// Backend selects where device state comes from.
type Backend string

// The backends. Auto uses NVML and falls back to the simulated device only
// when no NVIDIA driver is present (ErrNoDriver); any other NVML failure is
// an error, so that a GPU host never silently runs on made-up numbers.
const (
	BackendAuto Backend = "auto"
	BackendNVML Backend = "nvml"
	BackendSim  Backend = "sim"
)

// DefaultSimName is the GPU the simulated device pretends to be.
const DefaultSimName = "NVIDIA H200"

// MaxSimMemoryMiB bounds gpu.sim.memory_mib (16 TiB).
const MaxSimMemoryMiB = 1 << 24

// maxNameLen is NVML's device name buffer (NVML_DEVICE_NAME_V2_BUFFER_SIZE)
// less its terminating NUL.
const maxNameLen = 95

// Config is the gpu section of colocd's configuration. Keys in docs/gpu.md.
type Config struct {
	// Backend is auto, nvml or sim.
	Backend Backend `mapstructure:"backend" json:"backend"`
	// Device selects the GPU: an index ("0") or a UUID ("GPU-…"); see
	// ParseSelector. The simulated device takes it as its own index or
	// UUID.
	Device string `mapstructure:"device" json:"device"`
	// SMs overrides the SM count of the table; 0 uses the table.
	SMs int `mapstructure:"sms" json:"sms"`
	// EventWait is how long one wait for NVML events blocks; it bounds
	// how long Run takes to stop. 0 means one second.
	EventWait time.Duration `mapstructure:"event_wait" json:"event_wait"`
	// GrantInstances are other MIG devices of the same GPU, free of any
	// inference service, that the sidecar may lend whole to a training job
	// (Selector forms; only with a MIG Device). Give each to one sidecar.
	GrantInstances []string `mapstructure:"grant_instances" json:"grant_instances"`
	// Sim describes the simulated device.
	Sim SimConfig `mapstructure:"sim" json:"sim"`
}

// SimConfig describes the simulated device.
type SimConfig struct {
	// Name is the NVML name the simulated device reports; it picks the SM
	// count from the table like a real name does.
	Name string `mapstructure:"name" json:"name"`
	// MemoryMiB is the simulated device's memory; 0 takes it from the
	// name (see docs/gpu.md).
	MemoryMiB uint64 `mapstructure:"memory_mib" json:"memory_mib"`
	// MIG, when set, partitions the simulated GPU: its GPU instances'
	// profiles ("3g.71gb"), with GPU instance ids 1, 2, … in this order and
	// one compute instance (0) each; a MIG Device then selects one.
	MIG []string `mapstructure:"mig" json:"mig"`
}

// Default returns the configuration colocd starts from: backend auto, GPU 0,
// a simulated NVIDIA H200.
func Default() Config {
	return Config{
		Backend:        BackendAuto,
		Device:         "0",
		EventWait:      time.Second,
		GrantInstances: []string{},
		Sim:            SimConfig{Name: DefaultSimName, MIG: []string{}},
	}
}

// Validate checks every field and returns all problems at once, each a
// *field.Error naming the configuration key and the allowed values, in a
// list that matches ErrInvalidConfig.
func (c Config) Validate() error {
	var fc field.Checker
	add := fc.Add
	switch c.Backend {
	case BackendAuto, BackendNVML, BackendSim:
	default:
		add("gpu.backend", "one of auto, nvml, sim", quote(string(c.Backend)))
	}
	if sel, err := ParseSelector(c.Device); err != nil {
		add("gpu.device", `a GPU index (0–255), a GPU or MIG device UUID ("GPU-" or "MIG-" and 8-4-4-4-12 hex digits), or a MIG device as <gpu>:<gi>:<ci> ("0:1:0")`, quote(c.Device))
	} else if sel.IsMIG() && c.Backend == BackendSim && len(c.Sim.MIG) == 0 {
		add("gpu.device", "a whole GPU's index or UUID with backend sim, unless gpu.sim.mig partitions the simulated GPU", quote(c.Device))
	} else if c.Backend == BackendSim {
		c.checkSimInstance(add, "gpu.device", sel)
	}
	c.checkGrantInstances(add)
	if c.SMs < 0 || c.SMs > MaxSMs {
		add("gpu.sms", fmt.Sprintf("0 (use the table) or an SM count from 1 to %d", MaxSMs), strconv.Itoa(c.SMs))
	}
	if c.EventWait < 0 || c.EventWait > time.Minute {
		add("gpu.event_wait", "a duration from 0 (one second) to 1m", c.EventWait.String())
	}
	if c.Backend != BackendNVML {
		if !validName(c.Sim.Name) {
			add("gpu.sim.name", fmt.Sprintf("a device name of 1 to %d printable characters, e.g. %q", maxNameLen, DefaultSimName), quote(c.Sim.Name))
		}
		c.checkSimMIG(add)
		if c.Sim.MemoryMiB > MaxSimMemoryMiB {
			add("gpu.sim.memory_mib", fmt.Sprintf("0 (from the name) or a size in MiB up to %d", MaxSimMemoryMiB),
				strconv.FormatUint(c.Sim.MemoryMiB, 10))
		}
	}
	return fc.ErrKind("gpu configuration", ErrInvalidConfig)
}

func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// eventWait returns the configured wait or its default, within the bounds
// Validate enforces (NVML takes the wait as 32-bit milliseconds).
func (c Config) eventWait() time.Duration {
	switch {
	case c.EventWait <= 0:
		return time.Second
	case c.EventWait > time.Minute:
		return time.Minute
	}
	return c.EventWait
}

// quote quotes a value from the configuration for a message, cut to 80
// bytes: a problem repeats what it refuses, not a whole file.
func quote(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "…"
	}
	return strconv.Quote(s)
}
