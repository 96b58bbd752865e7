package sidecar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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

// TestReadyLineNamesTheURLInUse: the "colocd ready" line gives the
// address the embedded server really listens on (port 0 picks one), not
// the configured or the default one.
func TestReadyLineNamesTheURLInUse(t *testing.T) {
	var buf syncBuffer
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

// syncBuffer is a bytes.Buffer safe for the sidecar's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
