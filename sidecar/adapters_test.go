package sidecar

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/gpu"
)

// stateDevice is a gpu.Device whose State is fixed; its other methods are
// not used here.
type stateDevice struct {
	gpu.Device
	st  gpu.State
	err error
}

func (d stateDevice) State(context.Context) (gpu.State, error) { return d.st, d.err }

// TestAdmissionDeviceListsProcessesOnARealGPU: on NVML, register is checked
// against the GPU's compute processes and MPS clients; a simulated GPU,
// which knows no launcher's processes, does not list them.
func TestAdmissionDeviceListsProcessesOnARealGPU(t *testing.T) {
	dev := stateDevice{st: gpu.State{
		Processes:    []gpu.Process{{PID: 900}},               // the MPS server
		MPSProcesses: []gpu.Process{{PID: 4242}, {PID: 4243}}, // its clients
	}}
	if _, ok := admissionDevice(dev, gpu.BackendSim).(admission.ProcessLister); ok {
		t.Error("a simulated GPU lists processes")
	}
	pl, ok := admissionDevice(dev, gpu.BackendNVML).(admission.ProcessLister)
	if !ok {
		t.Fatal("an NVML GPU does not list processes")
	}
	pids, err := pl.ComputePIDs(context.Background())
	if err != nil || fmt.Sprint(pids) != "[900 4242 4243]" {
		t.Errorf("pids %v, %v", pids, err)
	}
	dev.err = errors.New("gpu lost")
	if _, err := admissionDevice(dev, gpu.BackendNVML).(admission.ProcessLister).ComputePIDs(context.Background()); err == nil {
		t.Error("a failed read gave pids")
	}
}
