package gpu

import (
	"context"
	"time"
)

// Device is what colocd's consumers read from the GPU. *NVMLDevice and
// *SimDevice implement it; a consumer such as admission declares the subset
// it needs.
type Device interface {
	// Info returns what does not change while the device is open.
	Info() Info
	// State reads the device's current memory, modes, utilization and
	// processes.
	State(ctx context.Context) (State, error)
	// Health returns the device's health as of the last event.
	Health() Health
	// Events delivers XID and health-change events; see Event.
	Events() <-chan Event
}

// ProcessSource says where the PIDs a device's State lists come from. A
// caller asks the device (a type assertion to ProcessSource) instead of
// testing its backend: a device that does not implement it lists no
// host's processes.
type ProcessSource interface {
	// HostProcesses reports whether State's processes are the host's own
	// (NVML: the PIDs launchers register can be checked against them),
	// not made up (a simulated device).
	HostProcesses() bool
}

// HostProcesses reports whether dev lists the host's own processes.
func HostProcesses(dev Device) bool {
	p, ok := dev.(ProcessSource)
	return ok && p.HostProcesses()
}

// Handle is a Device with its lifecycle, as Open returns it: the owner runs
// Run in a goroutine and calls Close after Run has returned or to stop it.
type Handle interface {
	Device
	// Run watches the device's health until ctx is done or Close is
	// called, then closes Events. It may be called once.
	Run(ctx context.Context) error
	// Close stops Run, waits for it, and releases the device.
	Close() error
}

// Info identifies the device. It does not change while the device is open.
type Info struct {
	Backend  Backend // BackendNVML or BackendSim, never auto
	Name     string  // as NVML reports it, e.g. "NVIDIA H200"
	UUID     string  // "GPU-…"; stable and made up for a simulated device
	Index    int     // NVML's index of the device
	SMs      int     // streaming multiprocessors
	SMSource string  // "table", "nvml" (a MIG device's) or "config" (the gpu.sms override)
	// MemoryTotalMiB is the device's memory as NVML reports it.
	MemoryTotalMiB uint64
	// Driver is the NVIDIA driver version, or "sim".
	Driver string
	// Fallback says why backend "auto" chose the simulated device; "" when
	// it did not fall back.
	Fallback string
	// MIG, when set, is the MIG device (a compute instance) guarded: then
	// UUID is its "MIG-…", Name and Index are its GPU's, SMs and
	// MemoryTotalMiB its own.
	MIG *MIGDevice
}

// State is one reading of the device's changing state.
type State struct {
	Time        time.Time
	Memory      Memory
	ComputeMode ComputeMode
	MIG         MIGMode
	Utilization Utilization
	// Processes are the device's compute processes. Under MPS NVML lists
	// the MPS server here, not its clients.
	Processes []Process
	// MPSProcesses are the clients of an MPS server on this device.
	MPSProcesses []Process
}

// Memory is device memory in MiB (floor of NVML's bytes), as NVML measures
// it, whoever allocated it.
type Memory struct {
	TotalMiB uint64
	UsedMiB  uint64
	FreeMiB  uint64
}

// UnknownMiB is Process.UsedMiB when the driver does not report a process's
// memory (NVML's "value not available").
const UnknownMiB = -1

// Process is one process with a context on the device.
type Process struct {
	PID uint32
	// UsedMiB is the process's device memory, or UnknownMiB.
	UsedMiB int64
	// Grant is the sidecar grant a simulated process stands for; "" for
	// processes read from NVML.
	Grant string
}

// ComputeMode is the device's compute mode. MPS wants exclusive_process;
// time-slicing between processes needs default.
type ComputeMode string

// The compute modes NVML reports, and unknown when it reports none.
const (
	ComputeModeDefault          ComputeMode = "default"
	ComputeModeExclusiveThread  ComputeMode = "exclusive_thread"
	ComputeModeProhibited       ComputeMode = "prohibited"
	ComputeModeExclusiveProcess ComputeMode = "exclusive_process"
	ComputeModeUnknown          ComputeMode = "unknown"
)

// MIGMode is the device's Multi-Instance GPU mode. Supported is false on GPUs
// without MIG; Pending is the mode after the next GPU reset.
type MIGMode struct {
	Supported bool
	Enabled   bool
	Pending   bool
}

// Utilization is NVML's sampled utilization in percent over its last sample
// period (between 1/6 s and 1 s): GPU is the time a kernel ran, Memory the
// time device memory was read or written. Known is false where NVML does not
// report it (for example with MIG enabled, or on the simulated device).
type Utilization struct {
	Known     bool
	GPUPct    int
	MemoryPct int
}
