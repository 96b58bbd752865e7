package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// migDevice is one MIG device added to the mock: go-nvml's server mock
// implements GPU and compute instances but no MIG device handles, so
// withMIG supplies them, speaking NVML's interface.
type migDevice struct {
	*mock.Device
	uuid    string
	gi, ci  int
	profile MIGProfile
}

// withMIG enables MIG on the mock's GPU i and gives it one MIG device per
// profile name (H200 profiles from colocd's cited table), GPU instance ids
// from 1 and compute instance 0, at MIG device indexes 0, 2, 4, … (NVML's
// indexes may have gaps).
// lendingMIG makes GPU 0 of x a MIG GPU with a 3g and a 4g instance and
// returns them with the config of a device on the 3g one (0:1:0) that
// may lend the 4g one.
func lendingMIG(t *testing.T, x *dgx) ([]*migDevice, Config) {
	t.Helper()
	migs := withMIG(t, x, 0, "3g.71gb", "4g.71gb")
	c := testConfig("0:1:0")
	c.GrantInstances = []string{migs[1].uuid}
	return migs, c
}

func withMIG(t *testing.T, x *dgx, i int, names ...string) []*migDevice {
	t.Helper()
	parent := x.device(i)
	parent.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	// NVML: with MIG on, the compute mode is read on a MIG device's handle.
	parent.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return 0, nvml.ERROR_INVALID_ARGUMENT }
	profiles, err := MIGProfiles(parent.Config.Name)
	if err != nil {
		t.Fatal(err)
	}
	var migs []*migDevice
	for k, name := range names {
		var p MIGProfile
		for _, q := range profiles {
			if q.Name == name {
				p = q
			}
		}
		if p.Name == "" {
			t.Fatalf("no H200 profile %q", name)
		}
		m := &migDevice{Device: &mock.Device{}, uuid: fmt.Sprintf("MIG-%08x-0000-4000-8000-%012x", i, k), gi: k + 1, profile: p}
		m.GetNameFunc = func() (string, nvml.Return) { return parent.Config.Name + " MIG " + p.Name, nvml.SUCCESS }
		m.GetUUIDFunc = func() (string, nvml.Return) { return m.uuid, nvml.SUCCESS }
		m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			total := uint64(p.MemoryMiB) << 20
			return nvml.Memory{Total: total, Used: 1024 << 20, Free: total - 1024<<20}, nvml.SUCCESS
		}
		m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
			return nvml.DeviceAttributes{MultiprocessorCount: uint32(p.SMs), GpuInstanceSliceCount: uint32(p.Slices),
				ComputeInstanceSliceCount: uint32(p.Slices), MemorySizeMB: uint64(p.MemoryMiB)}, nvml.SUCCESS
		}
		m.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
		m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return m.gi, nvml.SUCCESS }
		m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return m.ci, nvml.SUCCESS }
		m.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS }
		m.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
		m.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: uint32(5000 + k), UsedGpuMemory: 1 << 30, GpuInstanceId: uint32(m.gi)}}, nvml.SUCCESS
		}
		m.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		m.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return nvml.COMPUTEMODE_DEFAULT, nvml.SUCCESS }
		migs = append(migs, m)
	}
	parent.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	parent.GetMigDeviceHandleByIndexFunc = func(n int) (nvml.Device, nvml.Return) {
		if n%2 == 0 && n/2 < len(migs) {
			return migs[n/2], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	byUUID := x.DeviceGetHandleByUUIDFunc
	x.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		for _, m := range migs {
			if m.uuid == uuid {
				return m, nvml.SUCCESS
			}
		}
		return byUUID(uuid)
	}
	return migs
}

// A sidecar on a MIG device reads the instance's own SM count (from NVML's
// attributes, the GPU instance profile's) and memory, and its GPU's name,
// index and modes, whether the device is named by UUID or by instance ids.
func TestOpenMIGDevice(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	migs := withMIG(t, x, 1, "4g.71gb", "3g.71gb")
	parentUUID, _ := x.device(1).GetUUID()
	for _, sel := range []string{migs[1].uuid, "1:2:0", parentUUID + ":2:0"} {
		t.Run(sel, func(t *testing.T) {
			d := openMock(t, x, sel)
			info := d.Info()
			if info.UUID != migs[1].uuid || info.Name != x.device(1).Config.Name || info.Index != 1 || info.SMs != 60 || info.SMSource != "nvml" || info.MemoryTotalMiB != 71168 {
				t.Errorf("info %+v: want the 3g.71gb MIG device of GPU 1, 60 SMs from NVML, 71168 MiB", info)
			}
			want := MIGDevice{Name: x.device(1).Config.Name + " MIG 3g.71gb", Profile: "3g.71gb", ParentUUID: parentUUID, GI: 2, CI: 0, Slices: 3, ComputeSlices: 3, MemorySlices: 4, GPUSMs: 132}
			if info.MIG == nil || *info.MIG != want {
				t.Errorf("MIG %+v, want %+v", info.MIG, want)
			}
			s, err := d.State(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if s.Memory.TotalMiB != 71168 || len(s.Processes) != 1 || s.Processes[0].PID != 5001 || !s.MIG.Enabled || s.Utilization.Known || s.ComputeMode != ComputeModeDefault {
				t.Errorf("state %+v: want the MIG device's memory and process, MIG enabled, no utilization", s)
			}
		})
	}
	t.Run("gpu.sms overrides", func(t *testing.T) {
		c := testConfig("1:1:0")
		c.SMs = 50
		d, err := OpenNVML(context.Background(), x, c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if info := d.Info(); info.SMs != 50 || info.SMSource != "config" {
			t.Errorf("SMs %d from %s, want 50 from config", info.SMs, info.SMSource)
		}
	})
}

// A MIG device that is not there is ErrDeviceNotFound, saying what there
// is: the GPU's MIG devices, or none when MIG has no instances.
func TestOpenMIGDeviceNotFound(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	withMIG(t, x, 1, "4g.71gb", "3g.71gb")
	tests := []struct{ sel, want string }{
		{"1:5:0", "its MIG devices (gi:ci) are 1:0, 2:0"},
		{"2:1:0", "GPU 2 has no MIG devices"},
		{"MIG-00000009-0000-4000-8000-000000000000", "NVML knows no MIG device"},
	}
	for _, tt := range tests {
		_, err := OpenNVML(context.Background(), x, testConfig(tt.sel), Options{})
		if !errors.Is(err, ErrDeviceNotFound) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrDeviceNotFound with %q", tt.sel, err, tt.want)
		}
	}
}

// An XID on a MIG GPU counts for the sidecar of a MIG device when it names
// that device's GPU instance, or no instance; not another's.
func TestMIGDeviceXIDs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		gi   uint32
		ours bool
	}{{1, false}, {2, true}, {allInstances, true}} {
		x := newDGX(t)
		withMIG(t, x, 0, "4g.71gb", "3g.71gb")
		d := openMock(t, x, "0:2:0")
		d.handleEvent(nvml.EventData{Device: x.device(0), EventType: nvml.EventTypeXidCriticalError, EventData: 79, GpuInstanceId: tt.gi}, slog.New(slog.DiscardHandler))
		if h := d.Health(); (h.XID == 79) != tt.ours || h.Healthy == tt.ours {
			t.Errorf("XID 79 on GPU instance %#x: health %+v, want ours=%v", tt.gi, h, tt.ours)
		}
	}
}

// The H200's MIG profiles are NVIDIA's (MIG User Guide, Supported MIG
// Profiles, Table 8; a real H200's nvidia-smi mig -lgip for SMs and
// memory): go-nvml's mock has 48 SMs for a 3g and 112 for a 7g, which a
// real H200 does not.
func TestMIGProfilesH200(t *testing.T) {
	t.Parallel()
	got, err := MIGProfiles("NVIDIA H200 141GB HBM3e")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name                  string
		slices, memSlices, sm int
		starts                string
	}{
		{"1g.18gb", 1, 1, 16, "[0 1 2 3 4 5 6]"},
		{"1g.35gb", 1, 2, 26, "[0 2 4 6]"},
		{"2g.35gb", 2, 2, 32, "[0 2 4]"},
		{"3g.71gb", 3, 4, 60, "[0 4]"},
		{"4g.71gb", 4, 4, 64, "[0]"},
		{"7g.141gb", 7, 8, 132, "[0]"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d profiles, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Slices != w.slices || g.MemorySlices != w.memSlices || g.SMs != w.sm || fmt.Sprint(g.Starts) != w.starts {
			t.Errorf("profile %d = %+v, want %+v", i, g, w)
		}
		for _, s := range g.Starts {
			if s+g.MemorySlices > MIGMemorySlices {
				t.Errorf("%s at %d runs past slice %d", g.Name, s, MIGMemorySlices)
			}
		}
	}
	got[3].Starts[0] = 99 // a copy: the table stays
	if again, _ := MIGProfiles("NVIDIA H200"); again[3].Starts[0] != 0 {
		t.Error("MIGProfiles hands out its table")
	}
	if _, err := MIGProfiles("Tesla V100-SXM2-16GB"); !errors.Is(err, ErrUnknownMIG) || !strings.Contains(err.Error(), "H200") {
		t.Errorf("V100: %v, want ErrUnknownMIG naming the GPUs colocd knows", err)
	}
}

func TestMIGProfileOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"NVIDIA H200 MIG 3g.71gb":              "3g.71gb",
		"NVIDIA A100-SXM4-40GB MIG 1g.5gb":     "1g.5gb",
		"NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb": "3g.40gb",
		"NVIDIA H200":                          "",
		"NVIDIA H200 MIG something":            "",
		"NVIDIA H200 MIG 1g.18gb+me":           "1g.18gb+me",
		"NVIDIA H200 MIG g.gb":                 "",
	} {
		if got := migProfileOf(in); got != want {
			t.Errorf("migProfileOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// The H200's maximal layouts: every one keeps its instances apart in
// memory, none has room for one more, none uses more than 7 compute
// slices; the layouts NVIDIA's guide draws are among them.
func TestMIGLayoutsH200(t *testing.T) {
	t.Parallel()
	profiles, err := MIGProfiles("NVIDIA H200")
	if err != nil {
		t.Fatal(err)
	}
	layouts := MIGLayouts(profiles)
	names := map[string]bool{}
	for _, l := range layouts {
		names[l.Names()] = true
		used, compute := 0, 0
		for _, p := range l {
			mask := (1<<p.Profile.MemorySlices - 1) << p.Start
			if used&mask != 0 {
				t.Errorf("%s: instances overlap", l.Names())
			}
			used |= mask
			compute += p.Profile.Slices
		}
		if compute > 7 {
			t.Errorf("%s: %d compute slices", l.Names(), compute)
		}
		for _, p := range profiles {
			for _, s := range p.Starts {
				if m := (1<<p.MemorySlices - 1) << s; used&m == 0 && s+p.MemorySlices <= MIGMemorySlices {
					t.Errorf("%s: a %s still fits at %d", l.Names(), p.Name, s)
				}
			}
		}
	}
	for _, want := range []string{"7g.141gb", "4g.71gb+3g.71gb", "3g.71gb+3g.71gb", "4g.71gb+2g.35gb+1g.18gb",
		"3g.71gb+2g.35gb+2g.35gb", "1g.18gb+1g.18gb+1g.18gb+1g.18gb+1g.18gb+1g.18gb+1g.18gb", "1g.35gb+1g.35gb+1g.35gb+1g.35gb"} {
		if !names[want] {
			t.Errorf("layout %s missing", want)
		}
	}
	if len(layouts) != 38 {
		t.Errorf("%d layouts, want 38 (distinct profile sets of the maximal placements)", len(layouts))
	}
}

// A GPU instance's memory slices come from the table, else from its share
// of the GPU's memory, in eighths.
func TestMemorySlices(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, gpu, profile string
		mib, total         uint64
		want               int
	}{
		{"table", "NVIDIA H200", "1g.35gb", 33024, 143771, 2},
		{"table wins over memory", "NVIDIA H200", "3g.71gb", 1, 143771, 4},
		{"unknown GPU, by memory", "NVIDIA A30", "2g.12gb", 11968, 24062, 4},
		{"unknown profile, by memory", "NVIDIA H200", "", 16384, 143771, 1},
		{"tiny instance is one slice", "NVIDIA X", "", 10, 143771, 1},
		{"no GPU memory: whole", "NVIDIA X", "", 10, 0, 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := memorySlices(tt.gpu, tt.profile, tt.mib, tt.total); got != tt.want {
				t.Errorf("memorySlices(%q, %q, %d, %d) = %d, want %d", tt.gpu, tt.profile, tt.mib, tt.total, got, tt.want)
			}
		})
	}
}
