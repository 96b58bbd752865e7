package gpu

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// selectedHandles returns the handle of the device sel names and of its GPU
// (the same handle for a whole GPU). A MIG device is found by its UUID, or
// among its GPU's MIG devices by its GPU and compute instance ids; NVML has
// no call that takes the ids.
func selectedHandles(lib Library, sel Selector) (dev, parent nvmlDevice, err error) {
	h, err := deviceHandle(lib, sel)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case sel.Instance:
		mig, err := migByIDs(h, sel)
		return mig, h, err
	case strings.HasPrefix(sel.UUID, "MIG-"):
		if is, ret := h.IsMigDeviceHandle(); ret != nvml.SUCCESS || !is {
			return nil, nil, fmt.Errorf("%w: %s is not a MIG device handle (%s)", ErrDeviceNotFound, sel.UUID, returnText(ret))
		}
		p, ret := h.GetDeviceHandleFromMigDeviceHandle()
		if ret != nvml.SUCCESS {
			return nil, nil, nvmlErr("get the GPU of a MIG device", ret)
		}
		return h, p, nil
	}
	return h, h, nil
}

// migByIDs finds GPU gpu's MIG device with sel's instance ids. MIG device
// indexes may have gaps: an index NVML does not know is skipped.
func migByIDs(gpu nvmlDevice, sel Selector) (nvmlDevice, error) {
	n, ret := gpu.GetMaxMigDeviceCount()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		n = 0
	case ret != nvml.SUCCESS:
		return nil, nvmlErr("get MIG device count", ret)
	}
	var seen []string
	for i := range n {
		h, ret := gpu.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, nvmlErr("get MIG device handle", ret)
		}
		gi, ret := h.GetGpuInstanceId()
		if ret != nvml.SUCCESS {
			return nil, nvmlErr("get GPU instance id", ret)
		}
		ci, ret := h.GetComputeInstanceId()
		if ret != nvml.SUCCESS {
			return nil, nvmlErr("get compute instance id", ret)
		}
		if gi == sel.GI && ci == sel.CI {
			return h, nil
		}
		seen = append(seen, fmt.Sprintf("%d:%d", gi, ci))
	}
	gpuName := strings.TrimSuffix(sel.String(), fmt.Sprintf(":%d:%d", sel.GI, sel.CI))
	if len(seen) == 0 {
		return nil, fmt.Errorf("%w: GPU %s has no MIG devices (is MIG enabled, with instances made?)", ErrDeviceNotFound, gpuName)
	}
	return nil, fmt.Errorf("%w: GPU %s has no MIG device with GPU instance %d and compute instance %d; its MIG devices (gi:ci) are %s",
		ErrDeviceNotFound, gpuName, sel.GI, sel.CI, strings.Join(seen, ", "))
}

// migInfo reads a MIG device's identity and SM count. A MIG device is a
// compute instance: NVML's attributes give its SMs (all of its GPU
// instance's unless the instance is split into several).
func migInfo(h, parent nvmlDevice) (*MIGDevice, int, error) {
	m := &MIGDevice{}
	var ret nvml.Return
	if m.Name, ret = h.GetName(); ret != nvml.SUCCESS {
		return nil, 0, nvmlErr("get MIG device name", ret)
	}
	m.Profile = migProfileOf(m.Name)
	if m.ParentUUID, ret = parent.GetUUID(); ret != nvml.SUCCESS {
		return nil, 0, nvmlErr("get uuid", ret)
	}
	if m.GI, ret = h.GetGpuInstanceId(); ret != nvml.SUCCESS {
		return nil, 0, nvmlErr("get GPU instance id", ret)
	}
	if m.CI, ret = h.GetComputeInstanceId(); ret != nvml.SUCCESS {
		return nil, 0, nvmlErr("get compute instance id", ret)
	}
	attr, ret := h.GetAttributes()
	if ret != nvml.SUCCESS {
		return nil, 0, nvmlErr("get MIG device attributes", ret)
	}
	m.Slices, m.ComputeSlices = int(attr.GpuInstanceSliceCount), int(attr.ComputeInstanceSliceCount)
	sms := int(attr.MultiprocessorCount)
	if sms < 1 || sms > MaxSMs {
		return nil, 0, fmt.Errorf("MIG device %s: NVML reports %d SMs; set gpu.sms", m.Name, sms)
	}
	return m, sms, nil
}

// migShares sets what m is of its GPU (named gpuName): its memory slices,
// from the table or from its mib of the parent's memory, and the GPU's SM
// count.
func migShares(m *MIGDevice, gpuName string, mib uint64, parent nvmlDevice) {
	var total uint64
	if pm, ret := parent.GetMemoryInfo(); ret == nvml.SUCCESS {
		total = pm.Total >> 20
	}
	m.MemorySlices = memorySlices(gpuName, m.Profile, mib, total)
	m.GPUSMs, _ = SMCount(gpuName)
}

// lendHandle is one MIG device of gpu.grant_instances, found at open.
type lendHandle struct {
	dev nvmlDevice
	Lendable
}

// lendHandles finds the MIG devices of gpu.grant_instances: each must be a
// MIG device of the guarded device's GPU, other than it, and named once.
func lendHandles(lib Library, selectors []string, guarded Info) ([]lendHandle, error) {
	var out []lendHandle
	for i, g := range selectors {
		at := fmt.Sprintf("gpu.grant_instances[%d] %s", i, g)
		sel, err := ParseSelector(g)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		h, parent, err := selectedHandles(lib, sel)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if h == parent || guarded.MIG == nil {
			return nil, fmt.Errorf("%s: not a MIG device beside gpu.device's", at)
		}
		l := lendHandle{dev: h}
		var ret nvml.Return
		if l.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("%s: %w", at, nvmlErr("get uuid", ret))
		}
		mig, sms, err := migInfo(h, parent)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		switch {
		case mig.ParentUUID != guarded.MIG.ParentUUID:
			return nil, fmt.Errorf("%s: a MIG device of GPU %s, not of gpu.device's GPU %s", at, mig.ParentUUID, guarded.MIG.ParentUUID)
		case l.UUID == guarded.UUID:
			return nil, fmt.Errorf("%s: is gpu.device itself, whose inference service it serves", at)
		}
		for _, o := range out {
			if o.UUID == l.UUID {
				return nil, fmt.Errorf("%s: names %s again", at, l.UUID)
			}
		}
		mem, ret := h.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("%s: %w", at, nvmlErr("get memory info", ret))
		}
		migShares(mig, guarded.Name, mem.Total>>20, parent)
		l.MIG, l.SMs = *mig, sms
		out = append(out, l)
	}
	return out, nil
}

// Lendable reads the memory and compute processes of each MIG device of
// gpu.grant_instances, in their order.
func (d *NVMLDevice) Lendable(ctx context.Context) ([]Lendable, error) {
	if err := d.open(ctx, d.mu.RLocker()); err != nil {
		return nil, err
	}
	defer d.mu.RUnlock()
	out := make([]Lendable, 0, len(d.lend))
	for i, h := range d.lend {
		d.lendMu.Lock()
		l := h.Lendable
		l.Fault = d.lend[i].Fault
		d.lendMu.Unlock()
		mem, ret := h.dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("MIG device %s: %w", l.UUID, nvmlErr("get memory info", ret))
		}
		l.Memory = Memory{TotalMiB: mem.Total >> 20, UsedMiB: mem.Used >> 20, FreeMiB: mem.Free >> 20}
		var err error
		if l.Processes, err = processes("get compute processes", h.dev.GetComputeRunningProcesses); err != nil {
			return nil, fmt.Errorf("MIG device %s: %w", l.UUID, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// lentFault records a critical XID (not an application's) on the lent
// instances it names: the one of GPU instance gi, or every one for
// allInstances. A fault stays until the sidecar restarts, as the device's
// own does.
func (d *NVMLDevice) lentFault(gi uint32, xid uint64, log *slog.Logger) {
	if IsAppXID(xid) {
		return
	}
	d.lendMu.Lock()
	defer d.lendMu.Unlock()
	for i := range d.lend {
		l := &d.lend[i]
		if (gi == allInstances || int(gi) == l.MIG.GI) && l.Fault == "" {
			l.Fault = fmt.Sprintf("XID %d (%s)", xid, XIDText(xid))
			log.Error("lent MIG instance faulted", "instance", l.UUID, "xid", xid, "meaning", XIDText(xid))
		}
	}
}
