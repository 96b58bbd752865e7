package gpu

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/colocd/colocd/internal/fieldtest"
)

// A sidecar on one MIG device reads the MIG devices it may lend: their
// identity and SMs once, their memory and processes on every read.
func TestLendableNVML(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	migs, c := lendingMIG(t, x)
	migs[1].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	d := openMockWith(t, x, c)
	got, err := d.Lendable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parentUUID, _ := x.device(0).GetUUID()
	if len(got) != 1 || got[0].UUID != migs[1].uuid || got[0].SMs != 64 || got[0].MIG.Profile != "4g.71gb" || got[0].MIG.GI != 2 ||
		got[0].MIG.ParentUUID != parentUUID || got[0].MIG.MemorySlices != 4 || got[0].Memory.TotalMiB != 71168 || len(got[0].Processes) != 0 {
		t.Fatalf("lendable %+v: want the idle 4g.71gb, GPU instance 2, 64 SMs, 71168 MiB", got)
	}
	// A job starts on it.
	migs[1].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 777, UsedGpuMemory: 2 << 30}}, nvml.SUCCESS
	}
	got, err = d.Lendable(context.Background())
	if err != nil || len(got[0].Processes) != 1 || got[0].Processes[0].PID != 777 {
		t.Fatalf("after a job started: %+v, %v", got, err)
	}
	// A read that fails names the MIG device.
	migs[1].GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	if _, err := d.Lendable(context.Background()); err == nil || !strings.Contains(err.Error(), migs[1].uuid) {
		t.Errorf("failed read: %v, want an error naming %s", err, migs[1].uuid)
	}
	d.Close()
	if _, err := d.Lendable(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v, want ErrClosed", err)
	}
}

func TestLendableNVMLErrors(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	migs := withMIG(t, x, 0, "3g.71gb", "4g.71gb")
	other := withMIG(t, x, 1, "7g.141gb")
	parentUUID, _ := x.device(0).GetUUID()
	for _, tt := range []struct {
		name   string
		device string
		grant  []string
		want   string
	}{
		{"another GPU's instance", "0:1:0", []string{other[0].uuid}, "not of gpu.device's GPU"},
		{"the device itself, by UUID", "0:1:0", []string{migs[0].uuid}, "is gpu.device itself"},
		{"twice, in two forms", "0:1:0", []string{"0:2:0", migs[1].uuid}, "names " + migs[1].uuid + " again"},
		{"no such instance", "0:1:0", []string{parentUUID + ":5:0"}, "gpu.grant_instances[0] " + parentUUID + ":5:0: " + ErrDeviceNotFound.Error()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(tt.device)
			c.GrantInstances = tt.grant
			d, err := OpenNVML(context.Background(), x, c, Options{})
			if err == nil {
				d.Close()
			}
			fieldtest.WantText(t, err, tt.want)
		})
	}
}

// A partitioned simulated GPU: gpu.device picks one instance, the others
// of gpu.grant_instances are lent, and a grant reserved on one shows as its
// process and memory only.
func TestSimMIG(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Backend, c.Device = BackendSim, "0:1:0"
	c.Sim.MIG = []string{"3g.71gb", "4g.71gb"}
	c.GrantInstances = []string{"0:2:0"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := NewSim(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	info := s.Info()
	if info.MIG == nil || info.MIG.Profile != "3g.71gb" || info.SMs != 60 || info.MemoryTotalMiB != 71168 || !strings.HasPrefix(info.UUID, "MIG-") || info.MIG.GPUSMs != 132 || info.MIG.MemorySlices != 4 {
		t.Fatalf("info %+v (MIG %+v): want the 3g.71gb", info, info.MIG)
	}
	if sel, err := ParseSelector(info.UUID); err != nil || !sel.IsMIG() {
		t.Errorf("UUID %s does not parse as a MIG device: %v", info.UUID, err)
	}
	lend, err := s.Lendable(context.Background())
	if err != nil || len(lend) != 1 || lend[0].MIG.Profile != "4g.71gb" || lend[0].SMs != 64 || lend[0].Memory.FreeMiB != 71168 || len(lend[0].Processes) != 0 {
		t.Fatalf("lendable %+v, %v: want the free 4g.71gb", lend, err)
	}
	if err := s.ReserveOn(lend[0].UUID, "lease-1", 8192); err != nil {
		t.Fatal(err)
	}
	lend, _ = s.Lendable(context.Background())
	st, _ := s.State(context.Background())
	if len(lend[0].Processes) != 1 || lend[0].Memory.UsedMiB != 8192 || len(st.Processes) != 0 || st.Memory.UsedMiB != 0 || !st.MIG.Enabled {
		t.Errorf("after ReserveOn: lent %+v, own state %+v: want the grant on the lent instance only", lend, st)
	}
	if err := s.ReserveOn(lend[0].UUID, "lease-2", 70000); !errors.Is(err, ErrInsufficientMemory) {
		t.Errorf("too much for the instance: %v", err)
	}
	if err := s.ReserveOn("MIG-00000000-0000-0000-0000-000000000000", "lease-3", 1); !errors.Is(err, ErrDeviceNotFound) {
		t.Errorf("unknown instance: %v", err)
	}
	if err := s.Release("lease-1"); err != nil {
		t.Fatal(err)
	}
	if lend, _ = s.Lendable(context.Background()); len(lend[0].Processes) != 0 {
		t.Errorf("after release: %+v", lend)
	}
	// An instance of another GPU is not the simulated GPU's.
	c.GrantInstances = []string{"1:2:0"}
	if _, err := NewSim(c, Options{}); err == nil || !strings.Contains(err.Error(), "gpu.grant_instances[0] 1:2:0: names another GPU") {
		t.Errorf("an instance of GPU 1: %v", err)
	}
}

// A critical XID that names a lent instance, or the whole GPU, marks that
// instance faulted (and leaves the guarded device healthy unless it is
// named too); an application's XID marks nothing.
func TestLendableFaults(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		gi        uint32
		xid       uint64
		lentFault bool
		ownFault  bool
	}{
		{"the lent instance's", 2, 79, true, false},
		{"the whole GPU's", allInstances, 79, true, true},
		{"the guarded instance's", 1, 79, false, true},
		{"an application's", 2, 13, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := newDGX(t)
			_, c := lendingMIG(t, x)
			d := openMockWith(t, x, c)
			d.handleEvent(nvml.EventData{Device: x.device(0), EventType: nvml.EventTypeXidCriticalError, EventData: tt.xid, GpuInstanceId: tt.gi}, slog.New(slog.DiscardHandler))
			lend, err := d.Lendable(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := lend[0].Fault != ""; got != tt.lentFault {
				t.Errorf("lent instance fault %q, want faulted=%v", lend[0].Fault, tt.lentFault)
			}
			if got := !d.Health().Healthy; got != tt.ownFault {
				t.Errorf("guarded device health %+v, want faulted=%v", d.Health(), tt.ownFault)
			}
		})
	}
}

func TestMIGConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		set  func(c *Config)
		want string
	}{
		{"grant beside a whole GPU", func(c *Config) { c.GrantInstances = []string{"0:2:0"} }, "gpu.grant_instances: want none unless gpu.device is a MIG device"},
		{"grant not MIG", func(c *Config) { c.Device, c.GrantInstances = "0:1:0", []string{"1"} }, "gpu.grant_instances[0]: want a MIG device"},
		{"grant repeats the device", func(c *Config) { c.Device, c.GrantInstances = "0:1:0", []string{"0:1:0"} }, "gpu.grant_instances[0]: want a MIG device not named before, nor gpu.device"},
		{"too many", func(c *Config) {
			c.Device, c.GrantInstances = "0:1:0", []string{"0:2:0", "0:3:0", "0:4:0", "0:5:0", "0:6:0", "0:7:0", "0:8:0", "0:9:0"}
		}, "gpu.grant_instances: want at most 7"},
		{"sim MIG device without a layout", func(c *Config) { c.Backend, c.Device = BackendSim, "0:1:0" }, "unless gpu.sim.mig partitions"},
		{"sim profile unknown", func(c *Config) { c.Backend, c.Sim.MIG = BackendSim, []string{"3g.40gb"} }, "gpu.sim.mig[0]: want a GPU instance profile of NVIDIA H200: one of 1g.18gb"},
		{"sim layout does not fit", func(c *Config) { c.Backend, c.Sim.MIG = BackendSim, []string{"4g.71gb", "4g.71gb"} }, "gpu.sim.mig: want GPU instances that fit on the GPU together"},
		{"sim instance out of range", func(c *Config) {
			c.Backend, c.Device, c.Sim.MIG = BackendSim, "0:3:0", []string{"3g.71gb", "4g.71gb"}
		}, "gpu.device: want one of the simulated GPU's MIG devices, GPU instance 1 to 2"},
		{"sim grant out of range", func(c *Config) {
			c.Backend, c.Device, c.Sim.MIG, c.GrantInstances = BackendSim, "0:1:0", []string{"3g.71gb", "4g.71gb"}, []string{"0:2:1"}
		}, "gpu.grant_instances[0]: want one of the simulated GPU's MIG devices"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			fieldtest.WantText(t, c.Validate(), tt.want)
		})
	}
	// A layout whose instances fit only in one arrangement is accepted.
	c := Default()
	c.Backend, c.Device, c.Sim.MIG = BackendSim, "0:1:0", []string{"1g.18gb", "3g.71gb", "2g.35gb", "1g.18gb"}
	if err := c.Validate(); err != nil {
		t.Errorf("1g+3g+2g+1g: %v", err)
	}
}
