package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/internal/syncio"
)

// stateDevice is a gpu.Device whose State is fixed; its other methods are
// not used here. host says whether it lists the host's processes.
type stateDevice struct {
	gpu.Device
	st   gpu.State
	err  error
	host bool
}

func (d stateDevice) State(context.Context) (gpu.State, error) { return d.st, d.err }
func (d stateDevice) HostProcesses() bool                      { return d.host }

// TestAdmissionDeviceListsProcessesOnARealGPU: a device that lists the
// host's processes (NVML) has register checked against its compute
// processes and MPS clients; a simulated GPU, which knows no launcher's
// processes, does not list them.
func TestAdmissionDeviceListsProcessesOnARealGPU(t *testing.T) {
	t.Parallel()
	dev := stateDevice{st: gpu.State{
		Processes:    []gpu.Process{{PID: 900}},               // the MPS server
		MPSProcesses: []gpu.Process{{PID: 4242}, {PID: 4243}}, // its clients
	}}
	if _, ok := admissionDevice(dev).(admission.ProcessLister); ok {
		t.Error("a device of made-up processes lists processes")
	}
	dev.host = true
	pl, ok := admissionDevice(dev).(admission.ProcessLister)
	if !ok {
		t.Fatal("a device of the host's processes does not list them")
	}
	pids, err := pl.ComputePIDs(context.Background())
	if err != nil || fmt.Sprint(pids) != "[900 4242 4243]" {
		t.Errorf("pids %v, %v", pids, err)
	}
	dev.err = errors.New("gpu lost")
	if _, err := admissionDevice(dev).(admission.ProcessLister).ComputePIDs(context.Background()); err == nil {
		t.Error("a failed read gave pids")
	}
}

// The real backends say what they list: NVML the host's processes, the
// simulated device made-up ones.
func TestBackendsSayWhoseProcesses(t *testing.T) {
	t.Parallel()
	var nvml *gpu.NVMLDevice
	if !nvml.HostProcesses() {
		t.Error("NVML does not list the host's processes")
	}
	sim, err := gpu.NewSim(gpu.Default(), gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	if gpu.HostProcesses(sim) {
		t.Error("the simulated device lists the host's processes")
	}
}

// TestReadyLineNamesTheURLInUse: the "colocd ready" line gives the
// address the embedded server really listens on (port 0 picks one), not
// the configured or the default one.
func TestReadyLineNamesTheURLInUse(t *testing.T) {
	t.Parallel()
	var buf syncio.Buffer
	s := start(t, testConfig(t, "gpu-ready", 1e6), Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	url := s.embed.ClientURL()
	if url == "" || strings.HasSuffix(url, ":0") || strings.HasSuffix(url, ":4222") {
		t.Fatalf("client URL %q", url)
	}
	var ready string
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if strings.Contains(line, `msg="colocd ready"`) {
			ready = line
		}
	}
	if !strings.Contains(ready, "nats=\""+url+" (embedded)\"") {
		t.Errorf("ready line %q does not name %s", ready, url)
	}
}
