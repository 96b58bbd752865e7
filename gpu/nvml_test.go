package gpu

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestOpenNVMLSelectsDevice(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	tests := []struct {
		name      string
		device    func() string
		wantIndex int
	}{
		{name: "index 0", device: func() string { return "0" }, wantIndex: 0},
		{name: "index 7", device: func() string { return "7" }, wantIndex: 7},
		{name: "uuid", device: func() string { return x.device(5).UUID }, wantIndex: 5},
		{name: "upper-case uuid", device: func() string { return strings.ToUpper(x.device(2).UUID) }, wantIndex: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openMock(t, x, tt.device())
			got := d.Info()
			want := Info{
				Backend:        BackendNVML,
				Name:           "NVIDIA H200 141GB HBM3e",
				UUID:           x.device(tt.wantIndex).UUID,
				Index:          tt.wantIndex,
				SMs:            132,
				SMSource:       "table",
				MemoryTotalMiB: h200MiB,
				Driver:         "550.54.15",
			}
			if got != want {
				t.Errorf("Info() = %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestOpenNVMLErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		device    string
		sms       int
		setup     func(x *dgx)
		wantIs    error  // nil: want success
		wantText  string // in the error
		initFails bool
	}{
		{
			name:      "no driver library",
			setup:     func(x *dgx) { x.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND } },
			wantIs:    ErrNoDriver,
			wantText:  "libnvidia-ml.so.1 not found",
			initFails: true,
		},
		{
			name:      "kernel driver not loaded",
			setup:     func(x *dgx) { x.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED } },
			wantIs:    ErrNoDriver,
			initFails: true,
		},
		{
			name:      "no permission is not 'no driver'",
			setup:     func(x *dgx) { x.InitFunc = func() nvml.Return { return nvml.ERROR_NO_PERMISSION } },
			wantText:  "nvml init: no permission",
			initFails: true,
		},
		{name: "index past the last gpu", device: "8", wantIs: ErrDeviceNotFound, wantText: "NVML sees 8 GPU(s)"},
		{name: "unknown uuid", device: "GPU-00000000-0000-0000-0000-000000000000", wantIs: ErrDeviceNotFound},
		{
			name: "unknown device name",
			setup: func(x *dgx) {
				x.device(0).GetNameFunc = func() (string, nvml.Return) { return "NVIDIA A10G", nvml.SUCCESS }
			},
			wantIs:   ErrUnknownSMs,
			wantText: `"NVIDIA A10G": set gpu.sms`,
		},
		{
			name: "unknown device name with override",
			sms:  80,
			setup: func(x *dgx) {
				x.device(0).GetNameFunc = func() (string, nvml.Return) { return "NVIDIA A10G", nvml.SUCCESS }
			},
			wantIs: nil,
		},
		{name: "bad selector", device: "gpu0", wantIs: ErrInvalidSelector},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newDGX(t)
			if tt.setup != nil {
				tt.setup(x)
			}
			cfg := testConfig(tt.device)
			if tt.device == "" {
				cfg.Device = "0"
			}
			cfg.SMs = tt.sms
			d, err := OpenNVML(context.Background(), x, cfg, Options{})
			if tt.wantIs == nil && tt.wantText == "" {
				if err != nil {
					t.Fatalf("OpenNVML: %v", err)
				}
				if got := d.Info(); got.SMs != tt.sms || got.SMSource != "config" {
					t.Errorf("SMs = %d from %q, want %d from config", got.SMs, got.SMSource, tt.sms)
				}
				d.Close()
				return
			}
			if err == nil {
				d.Close()
				t.Fatal("OpenNVML succeeded, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q is not %v", err, tt.wantIs)
			}
			if tt.wantIs == nil && errors.Is(err, ErrNoDriver) {
				t.Errorf("error %q is ErrNoDriver, want another error", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
			if tt.initFails {
				assertNothingAfterFailedInit(t, x)
				var ne *NVMLError
				if !errors.As(err, &ne) || ne.Op != "init" {
					t.Errorf("error %q is not an *NVMLError for init", err)
				}
			} else if got := len(x.ShutdownCalls()); got != 1 && tt.wantIs != ErrInvalidSelector {
				t.Errorf("Shutdown called %d times after a failed open, want 1", got)
			}
		})
	}
}

// assertNothingAfterFailedInit checks that no NVML function but Init was
// called: after a failed Init, a call into the library can kill the process.
func assertNothingAfterFailedInit(t *testing.T, x *dgx) {
	t.Helper()
	calls := map[string]int{
		"Shutdown":               len(x.ShutdownCalls()),
		"SystemGetDriverVersion": len(x.SystemGetDriverVersionCalls()),
		"DeviceGetCount":         len(x.DeviceGetCountCalls()),
		"DeviceGetHandleByIndex": len(x.DeviceGetHandleByIndexCalls()),
		"DeviceGetHandleByUUID":  len(x.DeviceGetHandleByUUIDCalls()),
		"EventSetCreate":         len(x.EventSetCreateCalls()),
	}
	for name, n := range calls {
		if n != 0 {
			t.Errorf("%s called %d times after a failed Init", name, n)
		}
	}
	if n := len(x.InitCalls()); n != 1 {
		t.Errorf("Init called %d times, want 1", n)
	}
}

func TestState(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	dev := x.device(1)
	dev.MemoryInfo = nvml.Memory{Total: h200MiB << 20, Used: 20480<<20 + 5, Free: (h200MiB-20480)<<20 - 5}
	dev.SetMigMode(nvml.DEVICE_MIG_DISABLE)
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: 100, UsedGpuMemory: 16 << 30},
			{Pid: 101, UsedGpuMemory: math.MaxUint64}, // not available
		}, nvml.SUCCESS
	}
	dev.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 200, UsedGpuMemory: 4 << 30}}, nvml.SUCCESS
	}
	d := openMock(t, x, "1")

	got, err := d.State(context.Background())
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if got.Time.IsZero() {
		t.Error("State.Time is zero")
	}
	want := State{
		Time:         got.Time,
		Memory:       Memory{TotalMiB: h200MiB, UsedMiB: 20480, FreeMiB: h200MiB - 20480 - 1},
		ComputeMode:  ComputeModeExclusiveProcess,
		MIG:          MIGMode{Supported: true},
		Utilization:  Utilization{Known: true, GPUPct: 37, MemoryPct: 12},
		Processes:    []Process{{PID: 100, UsedMiB: 16384}, {PID: 101, UsedMiB: UnknownMiB}},
		MPSProcesses: []Process{{PID: 200, UsedMiB: 4096}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("State() =\n%+v\nwant\n%+v", got, want)
	}

	dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	got, err = d.State(context.Background())
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if want := (MIGMode{Supported: true, Enabled: true, Pending: true}); got.MIG != want {
		t.Errorf("MIG = %+v, want %+v", got.MIG, want)
	}
}

func TestStateComputeModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mode nvml.ComputeMode
		ret  nvml.Return
		want ComputeMode
	}{
		{name: "default", mode: nvml.COMPUTEMODE_DEFAULT, want: ComputeModeDefault},
		{name: "exclusive thread", mode: nvml.COMPUTEMODE_EXCLUSIVE_THREAD, want: ComputeModeExclusiveThread},
		{name: "prohibited", mode: nvml.COMPUTEMODE_PROHIBITED, want: ComputeModeProhibited},
		{name: "exclusive process", mode: nvml.COMPUTEMODE_EXCLUSIVE_PROCESS, want: ComputeModeExclusiveProcess},
		{name: "out of range", mode: 9, want: ComputeModeUnknown},
		{name: "not supported", ret: nvml.ERROR_NOT_SUPPORTED, want: ComputeModeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newDGX(t)
			x.device(0).GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return tt.mode, tt.ret }
			d := openMock(t, x, "0")
			s, err := d.State(context.Background())
			if err != nil {
				t.Fatalf("State: %v", err)
			}
			if s.ComputeMode != tt.want {
				t.Errorf("ComputeMode = %q, want %q", s.ComputeMode, tt.want)
			}
		})
	}
}

func TestStateNotSupported(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	dev := x.device(0)
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	dev.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d := openMock(t, x, "0")
	s, err := d.State(context.Background())
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if s.Utilization.Known || s.MIG.Supported || s.Processes != nil {
		t.Errorf("State = %+v, want unknown utilization, MIG unsupported, no processes", s)
	}
}

func TestStateErrors(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		setup  func(x *dgx)
		after  func(x *dgx) // after Open
		close  bool
		wantIs error
		wantOp string
	}{
		{
			name:   "gpu lost",
			after:  func(x *dgx) { x.device(0).GetMemoryInfoFunc = lostMemory },
			wantIs: ErrGPULost,
			wantOp: "get memory info",
		},
		{
			name: "utilization fails",
			setup: func(x *dgx) {
				x.device(0).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
					return nvml.Utilization{}, nvml.ERROR_UNKNOWN
				}
			},
			wantOp: "get utilization",
		},
		{
			name: "mps processes fail",
			setup: func(x *dgx) {
				x.device(0).GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
					return nil, nvml.ERROR_NO_PERMISSION
				}
			},
			wantOp: "get MPS compute processes",
		},
		{name: "canceled context", ctx: canceled, wantIs: context.Canceled},
		{name: "closed", close: true, wantIs: ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newDGX(t)
			if tt.setup != nil {
				tt.setup(x)
			}
			d := openMock(t, x, "0")
			if tt.after != nil {
				tt.after(x)
			}
			if tt.close {
				d.Close()
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			_, err := d.State(ctx)
			if err == nil {
				t.Fatal("State succeeded, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q is not %v", err, tt.wantIs)
			}
			var ne *NVMLError
			if tt.wantOp != "" && (!errors.As(err, &ne) || ne.Op != tt.wantOp) {
				t.Errorf("error %q is not an *NVMLError for %q", err, tt.wantOp)
			}
		})
	}
}

func lostMemory() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }

func TestCloseShutsDownOnce(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	d, err := OpenNVML(context.Background(), x, testConfig("0"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := d.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	if n := len(x.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
	if _, ok := <-d.Events(); ok {
		t.Error("Events open after Close")
	}
}

func TestCloseReportsShutdownError(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	x.ShutdownFunc = func() nvml.Return { return nvml.ERROR_UNKNOWN }
	d, err := OpenNVML(context.Background(), x, testConfig("0"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ne *NVMLError
	if err := d.Close(); !errors.As(err, &ne) || ne.Op != "shutdown" {
		t.Errorf("Close = %v, want an *NVMLError for shutdown", err)
	}
}

func TestNVMLErrorText(t *testing.T) {
	t.Parallel()
	for ret, want := range map[nvml.Return]string{
		nvml.ERROR_LIB_RM_VERSION_MISMATCH: "nvml init: NVML library and kernel driver versions differ (reload the driver)",
		nvml.Return(9999):                  "nvml init: NVML return code 9999", // a code this colocd does not know
	} {
		if got := (&NVMLError{Op: "init", Return: ret}).Error(); got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
	}
}
