package gpu

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// h200MiB is the memory go-nvml's H200 mock reports.
const h200MiB = 144384

// dgx is go-nvml's 8-GPU DGX H200 mock with every method colocd calls
// filled in (the mock leaves them nil, and a nil one panics), plus an event
// set whose Wait returns what the test sends on xids.
type dgx struct {
	*server.Server
	set  *mock.EventSet
	xids chan nvml.EventData
}

func newDGX(t *testing.T) *dgx {
	t.Helper()
	x := &dgx{Server: dgxh200.New(), xids: make(chan nvml.EventData, 16)}
	for _, d := range x.Devices {
		dev := d.(*server.Device)
		dev.MemoryInfo = nvml.Memory{Total: h200MiB << 20, Used: 4096 << 20, Free: (h200MiB - 4096) << 20}
		dev.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) {
			return nvml.COMPUTEMODE_EXCLUSIVE_PROCESS, nvml.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 37, Memory: 12}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 3 << 30}}, nvml.SUCCESS
		}
		dev.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return nil, nvml.SUCCESS
		}
		dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
		// MIG off: no MIG devices (withMIG makes some).
		dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
		dev.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	}
	x.set = &mock.EventSet{
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			timer := time.NewTimer(time.Duration(ms) * time.Millisecond)
			defer timer.Stop()
			select {
			case e := <-x.xids:
				return e, nvml.SUCCESS
			case <-timer.C:
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	x.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return x.set, nvml.SUCCESS }
	return x
}

// serverDevice is one GPU of the mock.
type serverDevice = server.Device

// device returns the mock's GPU i.
func (x *dgx) device(i int) *server.Device { return x.Devices[i].(*server.Device) }

// sendXID makes the mock driver report xid on GPU i.
func (x *dgx) sendXID(i int, xid uint64) {
	x.xids <- nvml.EventData{Device: x.Devices[i], EventType: nvml.EventTypeXidCriticalError, EventData: xid}
}

// testConfig is a config for the mock with a short event wait.
func testConfig(device string) Config {
	c := Default()
	c.Device = device
	c.EventWait = 5 * time.Millisecond
	return c
}

// openMock opens GPU device of the mock and closes it when the test ends.
func openMock(t *testing.T, x *dgx, device string) *NVMLDevice {
	t.Helper()
	return openMockWith(t, x, testConfig(device))
}

// openMockWith is openMock with the config c.
func openMockWith(t *testing.T, x *dgx, c Config) *NVMLDevice {
	t.Helper()
	d, err := OpenNVML(context.Background(), x, c, Options{})
	if err != nil {
		t.Fatalf("OpenNVML: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// runDevice starts h.Run and returns a function that stops it and returns
// Run's error.
func runDevice(t *testing.T, h Handle) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var stopped atomic.Bool
	stop = func() error {
		if !stopped.CompareAndSwap(false, true) {
			return nil
		}
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(eventTimeout):
			t.Fatal("Run did not return after cancel")
			return nil
		}
	}
	t.Cleanup(func() { stop() })
	return stop
}
