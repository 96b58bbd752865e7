package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	noDriver := func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	noPermission := func() nvml.Return { return nvml.ERROR_NO_PERMISSION }
	tests := []struct {
		name        string
		backend     Backend
		init        func() nvml.Return // nil: the mock's own
		wantBackend Backend            // "": want an error
		wantIs      error
		wantLog     string
		wantNoInit  bool // the NVML library must not even be initialised
	}{
		{name: "nvml", backend: BackendNVML, wantBackend: BackendNVML},
		{name: "nvml without driver", backend: BackendNVML, init: noDriver, wantIs: ErrNoDriver},
		{name: "sim", backend: BackendSim, wantBackend: BackendSim, wantNoInit: true},
		{name: "auto with a driver", backend: BackendAuto, wantBackend: BackendNVML},
		{
			name: "auto without driver falls back", backend: BackendAuto, init: noDriver, wantBackend: BackendSim,
			wantLog: "gpu backend auto falls back to a SIMULATED gpu",
		},
		{name: "auto with a broken driver fails", backend: BackendAuto, init: noPermission},
		{name: "invalid config", backend: "cuda", wantIs: ErrInvalidConfig, wantNoInit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, cfg := mockWith(t, tt.init, tt.backend)
			log, buf := newTestLogger()
			h, err := open(context.Background(), cfg, Options{Logger: log}, func() Library { return x })
			if tt.wantNoInit && len(x.InitCalls()) != 0 {
				t.Errorf("NVML initialised for backend %q", tt.backend)
			}
			if tt.wantBackend == "" {
				if err == nil {
					h.Close()
					t.Fatal("Open succeeded, want an error")
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("error %q is not %v", err, tt.wantIs)
				}
				if errors.Is(err, ErrNoDriver) && tt.wantIs != ErrNoDriver {
					t.Errorf("error %q is ErrNoDriver", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer h.Close()
			info := h.Info()
			if info.Backend != tt.wantBackend {
				t.Errorf("backend %q, want %q", info.Backend, tt.wantBackend)
			}
			fellBack := tt.wantLog != ""
			if (info.Fallback != "") != fellBack {
				t.Errorf("Info().Fallback = %q, want a reason: %v", info.Fallback, fellBack)
			}
			if fellBack {
				for _, want := range []string{tt.wantLog, "level=WARN", "libnvidia-ml.so.1 not found", "name=\"NVIDIA H200\""} {
					if !strings.Contains(buf.String(), want) {
						t.Errorf("log lacks %q:\n%s", want, buf)
					}
				}
				assertNothingAfterFailedInit(t, x)
			}
		})
	}
}

// TestOpenRealLibrary opens the real NVML on this host. Without a driver it
// must fail cleanly with ErrNoDriver (a crash here is the bug it guards
// against), and auto must fall back to the simulated device.
func TestOpenRealLibrary(t *testing.T) {
	// Not parallel: it loads and initialises the process's one NVML library.
	cfg := testConfig("0")
	cfg.Backend = BackendNVML
	h, err := Open(context.Background(), cfg, Options{})
	if err == nil {
		h.Close()
		t.Skip("an NVIDIA driver is present; this test is for hosts without one")
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Skipf("NVML present but failing: %v", err)
	}
	cfg.Backend = BackendAuto
	h, err = Open(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatalf("Open auto: %v", err)
	}
	defer h.Close()
	if info := h.Info(); info.Backend != BackendSim || !strings.Contains(info.Fallback, "no NVIDIA driver") {
		t.Errorf("Info() = %+v, want the simulated device with a fallback reason", info)
	}
}

func TestOpenErrorReturnsNilHandle(t *testing.T) {
	t.Parallel()
	noDriver := func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	tests := []struct {
		name    string
		backend Backend
		init    func() nvml.Return
		simName string
		wantIs  []error
	}{
		{name: "nvml", backend: BackendNVML, init: noDriver, wantIs: []error{ErrNoDriver}},
		{name: "sim", backend: BackendSim, simName: "NVIDIA A10G", wantIs: []error{ErrUnknownSMs}},
		{
			name: "auto falls back to a sim it cannot build", backend: BackendAuto, init: noDriver, simName: "NVIDIA A10G",
			wantIs: []error{ErrNoDriver, ErrUnknownSMs},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, cfg := mockWith(t, tt.init, tt.backend)
			if tt.simName != "" {
				cfg.Sim.Name = tt.simName
			}
			h, err := open(context.Background(), cfg, Options{}, func() Library { return x })
			if err == nil || h != nil {
				t.Fatalf("open = %v, %v; want a nil Handle and an error", h, err)
			}
			for _, want := range tt.wantIs {
				if !errors.Is(err, want) {
					t.Errorf("error %q is not %v", err, want)
				}
			}
		})
	}
}

// mockWith is a new mock whose NVML initialises with init (nil: the
// mock's own) and the config of its GPU 0 on backend.
func mockWith(t *testing.T, init func() nvml.Return, backend Backend) (*dgx, Config) {
	t.Helper()
	x := newDGX(t)
	if init != nil {
		x.InitFunc = init
	}
	cfg := testConfig("0")
	cfg.Backend = backend
	return x, cfg
}
