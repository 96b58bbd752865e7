package gpu

import (
	"fmt"
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
