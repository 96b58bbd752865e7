package gpu

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Library is the part of NVML colocd calls at the system level. nvml.New()
// and go-nvml's mocks (pkg/nvml/mock/dgxh200, …) implement it.
type Library interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	DeviceGetHandleByUUID(string) (nvml.Device, nvml.Return)
	EventSetCreate() (nvml.EventSet, nvml.Return)
}

// nvmlDevice is the part of an NVML device handle colocd calls.
type nvmlDevice interface {
	GetName() (string, nvml.Return)
	GetUUID() (string, nvml.Return)
	GetIndex() (int, nvml.Return)
	GetMemoryInfo() (nvml.Memory, nvml.Return)
	GetComputeMode() (nvml.ComputeMode, nvml.Return)
	GetMigMode() (int, int, nvml.Return)
	GetUtilizationRates() (nvml.Utilization, nvml.Return)
	GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return)
	GetMPSComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return)
	GetSupportedEventTypes() (uint64, nvml.Return)
	RegisterEvents(uint64, nvml.EventSet) nvml.Return
	// MIG: a GPU's MIG devices, and a MIG device's own figures and parent.
	GetMaxMigDeviceCount() (int, nvml.Return)
	GetMigDeviceHandleByIndex(int) (nvml.Device, nvml.Return)
	IsMigDeviceHandle() (bool, nvml.Return)
	GetGpuInstanceId() (int, nvml.Return)
	GetComputeInstanceId() (int, nvml.Return)
	GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return)
	GetAttributes() (nvml.DeviceAttributes, nvml.Return)
}

// NVMLDevice is one physical GPU, or one MIG device of a GPU, read through
// NVML. It holds NVML initialised from OpenNVML until Close.
type NVMLDevice struct {
	lib Library
	// dev is the device guarded: memory, processes, utilization and
	// compute mode are its. parent is its GPU (dev itself for a whole
	// GPU): XID events and MIG mode are the GPU's.
	dev, parent nvmlDevice
	// lend are the MIG devices of gpu.grant_instances; lendMu guards
	// their Fault, which the event loop sets.
	lend   []lendHandle
	lendMu sync.Mutex
	info   Info
	wait   time.Duration
	logger *slog.Logger
	mon    *monitor

	// mu guards the NVML session: NVML calls hold it for reading, Close
	// for writing, so that nothing calls into a shut-down library.
	mu sync.RWMutex
	runState
}

// OpenNVML initialises NVML through lib, finds the configured GPU and reads
// its identity. If Init fails nothing else is called in lib (calling into an
// uninitialised NVML can kill the process); with no driver the error wraps
// ErrNoDriver. An unknown SM count without the gpu.sms override fails with
// ErrUnknownSMs. Pass nvml.New() for the real library. opts.Logger is used by
// Run only.
func OpenNVML(ctx context.Context, lib Library, cfg Config, opts Options) (*NVMLDevice, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sel, err := ParseSelector(cfg.Device)
	if err != nil {
		return nil, err
	}
	if err := nvmlErr("init", lib.Init()); err != nil {
		return nil, fmt.Errorf("open gpu: %w", err)
	}
	d, err := openInitialised(lib, sel, cfg)
	if err != nil {
		lib.Shutdown()
		return nil, fmt.Errorf("open gpu %s: %w", sel, err)
	}
	d.logger = opts.logger()
	return d, nil
}

func openInitialised(lib Library, sel Selector, cfg Config) (*NVMLDevice, error) {
	h, parent, err := selectedHandles(lib, sel)
	if err != nil {
		return nil, err
	}
	info := Info{Backend: BackendNVML}
	var ret nvml.Return
	if info.Name, ret = parent.GetName(); ret != nvml.SUCCESS {
		return nil, nvmlErr("get name", ret)
	}
	if info.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
		return nil, nvmlErr("get uuid", ret)
	}
	if info.Index, ret = parent.GetIndex(); ret != nvml.SUCCESS {
		return nil, nvmlErr("get index", ret)
	}
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return nil, nvmlErr("get memory info", ret)
	}
	info.MemoryTotalMiB = mem.Total >> 20
	if info.Driver, ret = lib.SystemGetDriverVersion(); ret != nvml.SUCCESS {
		info.Driver = "unknown"
	}
	if h != parent {
		if info.MIG, info.SMs, err = migInfo(h, parent); err != nil {
			return nil, err
		}
		migShares(info.MIG, info.Name, info.MemoryTotalMiB, parent)
		info.SMSource = "nvml"
		if cfg.SMs > 0 {
			info.SMs, info.SMSource = cfg.SMs, "config"
		}
	} else if info.SMs, info.SMSource, err = resolveSMs(info.Name, cfg.SMs); err != nil {
		return nil, err
	}
	lend, err := lendHandles(lib, cfg.GrantInstances, info)
	if err != nil {
		return nil, err
	}
	return &NVMLDevice{
		lib:      lib,
		dev:      h,
		parent:   parent,
		lend:     lend,
		info:     info,
		wait:     cfg.eventWait(),
		mon:      newMonitor(time.Now()),
		runState: newRunState(),
	}, nil
}

// deviceHandle looks the selected GPU (or MIG device, by UUID) up. A
// missing one wraps ErrDeviceNotFound and says how many GPUs NVML sees.
func deviceHandle(lib Library, sel Selector) (nvmlDevice, error) {
	var (
		h   nvml.Device
		ret nvml.Return
	)
	if sel.IsUUID() {
		h, ret = lib.DeviceGetHandleByUUID(sel.UUID)
	} else {
		h, ret = lib.DeviceGetHandleByIndex(sel.Index)
	}
	switch ret {
	case nvml.SUCCESS:
		return h, nil
	case nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_NOT_FOUND, nvml.ERROR_GPU_NOT_FOUND:
		if strings.HasPrefix(sel.UUID, "MIG-") {
			return nil, fmt.Errorf("%w: NVML knows no MIG device %s (nvidia-smi -L lists them)", ErrDeviceNotFound, sel.UUID)
		}
		n, cret := lib.DeviceGetCount()
		if cret != nvml.SUCCESS {
			return nil, fmt.Errorf("%w: %w", ErrDeviceNotFound, nvmlErr("get device handle", ret))
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: NVML sees no GPU", ErrDeviceNotFound)
		}
		return nil, fmt.Errorf("%w: NVML sees %d GPU(s), indexes 0 to %d", ErrDeviceNotFound, n, n-1)
	}
	return nil, nvmlErr("get device handle", ret)
}

// Info returns the device's identity.
func (d *NVMLDevice) Info() Info { return d.info }

// HostProcesses is true: NVML lists the host's compute processes and MPS
// clients.
func (d *NVMLDevice) HostProcesses() bool { return true }

// Health returns the device's health as of the last event Run saw.
func (d *NVMLDevice) Health() Health { return d.mon.current() }

// Events delivers the events Run sees; Run closes it when it returns.
func (d *NVMLDevice) Events() <-chan Event { return d.mon.events }

// State reads memory, compute mode, MIG mode, utilization and processes.
// Readings a device does not support (utilization under MIG, MIG on older
// GPUs) come back as unknown; any other failed read is an *NVMLError, and a
// lost GPU matches ErrGPULost. NVML calls cannot be interrupted: ctx is
// checked before reading.
func (d *NVMLDevice) State(ctx context.Context) (State, error) {
	if err := d.open(ctx, d.mu.RLocker()); err != nil {
		return State{}, err
	}
	defer d.mu.RUnlock()
	s := State{Time: time.Now()}
	mem, ret := d.dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return State{}, nvmlErr("get memory info", ret)
	}
	s.Memory = Memory{TotalMiB: mem.Total >> 20, UsedMiB: mem.Used >> 20, FreeMiB: mem.Free >> 20}
	var err error
	if s.ComputeMode, err = d.computeMode(); err != nil {
		return State{}, err
	}
	if s.MIG, err = d.migMode(); err != nil {
		return State{}, err
	}
	if s.Utilization, err = d.utilization(); err != nil {
		return State{}, err
	}
	if s.Processes, err = processes("get compute processes", d.dev.GetComputeRunningProcesses); err != nil {
		return State{}, err
	}
	if s.MPSProcesses, err = processes("get MPS compute processes", d.dev.GetMPSComputeRunningProcesses); err != nil {
		return State{}, err
	}
	return s, nil
}

func (d *NVMLDevice) computeMode() (ComputeMode, error) {
	m, ret := d.dev.GetComputeMode() // NVML: on a MIG GPU, the MIG device's handle
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		return ComputeModeUnknown, nil
	case ret != nvml.SUCCESS:
		return "", nvmlErr("get compute mode", ret)
	}
	switch m {
	case nvml.COMPUTEMODE_DEFAULT:
		return ComputeModeDefault, nil
	case nvml.COMPUTEMODE_EXCLUSIVE_THREAD:
		return ComputeModeExclusiveThread, nil
	case nvml.COMPUTEMODE_PROHIBITED:
		return ComputeModeProhibited, nil
	case nvml.COMPUTEMODE_EXCLUSIVE_PROCESS:
		return ComputeModeExclusiveProcess, nil
	}
	return ComputeModeUnknown, nil
}

func (d *NVMLDevice) migMode() (MIGMode, error) {
	cur, pending, ret := d.parent.GetMigMode()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		return MIGMode{}, nil
	case ret != nvml.SUCCESS:
		return MIGMode{}, nvmlErr("get MIG mode", ret)
	}
	return MIGMode{
		Supported: true,
		Enabled:   cur == nvml.DEVICE_MIG_ENABLE,
		Pending:   pending == nvml.DEVICE_MIG_ENABLE,
	}, nil
}

func (d *NVMLDevice) utilization() (Utilization, error) {
	u, ret := d.dev.GetUtilizationRates()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		return Utilization{}, nil
	case ret != nvml.SUCCESS:
		return Utilization{}, nvmlErr("get utilization", ret)
	}
	return Utilization{Known: true, GPUPct: int(u.Gpu), MemoryPct: int(u.Memory)}, nil
}

// processes converts NVML's process list; NOT_SUPPORTED reads as none.
func processes(op string, get func() ([]nvml.ProcessInfo, nvml.Return)) ([]Process, error) {
	infos, ret := get()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		return nil, nil
	case ret != nvml.SUCCESS:
		return nil, nvmlErr(op, ret)
	}
	out := make([]Process, 0, len(infos))
	for _, p := range infos {
		used := int64(UnknownMiB)
		if p.UsedGpuMemory != math.MaxUint64 {
			used = int64(p.UsedGpuMemory >> 20)
		}
		out = append(out, Process{PID: p.Pid, UsedMiB: used})
	}
	return out, nil
}

// Close stops Run if it is running, waits for it, and shuts NVML down. It
// is safe to call more than once; later calls return nil.
func (d *NVMLDevice) Close() error {
	if !d.shut(&d.mu, d.mon) {
		return nil
	}
	// Run has returned and State calls see closed: nothing uses NVML now.
	if err := nvmlErr("shutdown", d.lib.Shutdown()); err != nil {
		return fmt.Errorf("close gpu: %w", err)
	}
	return nil
}
