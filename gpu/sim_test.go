package gpu

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func simConfig(mutate func(c *Config)) Config {
	c := Default()
	c.Backend = BackendSim
	if mutate != nil {
		mutate(&c)
	}
	return c
}

func newTestSim(t *testing.T, mutate func(c *Config)) *SimDevice {
	t.Helper()
	s, err := NewSim(simConfig(mutate), Options{})
	if err != nil {
		t.Fatalf("NewSim: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestNewSim(t *testing.T) {
	t.Parallel()
	const uuid = "GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40"
	tests := []struct {
		name     string
		mutate   func(c *Config)
		want     Info   // zero: NewSim fails
		wantIs   error  // on failure
		wantText string // on failure
	}{
		{
			name: "default h200",
			want: Info{Backend: BackendSim, Name: "NVIDIA H200", UUID: simUUID("NVIDIA H200", 0),
				SMs: 132, SMSource: "table", MemoryTotalMiB: 143771, Driver: "sim"},
		},
		{
			name:   "index",
			mutate: func(c *Config) { c.Device = "3" },
			want: Info{Backend: BackendSim, Name: "NVIDIA H200", UUID: simUUID("NVIDIA H200", 3), Index: 3,
				SMs: 132, SMSource: "table", MemoryTotalMiB: 143771, Driver: "sim"},
		},
		{
			name:   "uuid",
			mutate: func(c *Config) { c.Device = uuid },
			want: Info{Backend: BackendSim, Name: "NVIDIA H200", UUID: uuid,
				SMs: 132, SMSource: "table", MemoryTotalMiB: 143771, Driver: "sim"},
		},
		{
			name:   "memory from the name",
			mutate: func(c *Config) { c.Sim.Name = "NVIDIA A100-SXM4-80GB" },
			want: Info{Backend: BackendSim, Name: "NVIDIA A100-SXM4-80GB", UUID: simUUID("NVIDIA A100-SXM4-80GB", 0),
				SMs: 108, SMSource: "table", MemoryTotalMiB: 81920, Driver: "sim"},
		},
		{
			name: "overrides",
			mutate: func(c *Config) {
				c.Sim = SimConfig{Name: "NVIDIA RTX PRO 6000", MemoryMiB: 97887}
				c.SMs = 188
			},
			want: Info{Backend: BackendSim, Name: "NVIDIA RTX PRO 6000", UUID: simUUID("NVIDIA RTX PRO 6000", 0),
				SMs: 188, SMSource: "config", MemoryTotalMiB: 97887, Driver: "sim"},
		},
		{
			name:     "unknown name",
			mutate:   func(c *Config) { c.Sim = SimConfig{Name: "NVIDIA A10G", MemoryMiB: 23028} },
			wantIs:   ErrUnknownSMs,
			wantText: `"NVIDIA A10G": set gpu.sms`,
		},
		{
			name:     "no memory size",
			mutate:   func(c *Config) { c.Sim.Name = "NVIDIA L4" },
			wantText: `simulated device "NVIDIA L4": set gpu.sim.memory_mib`,
		},
		{name: "bad selector", mutate: func(c *Config) { c.Device = "-1" }, wantIs: ErrInvalidSelector},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSim(simConfig(tt.mutate), Options{})
			if tt.want == (Info{}) {
				if err == nil {
					s.Close()
					t.Fatal("NewSim succeeded, want an error")
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("error %q is not %v", err, tt.wantIs)
				}
				if !strings.Contains(err.Error(), tt.wantText) {
					t.Errorf("error %q lacks %q", err, tt.wantText)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewSim: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			if got := s.Info(); got != tt.want {
				t.Errorf("Info() = %+v\nwant %+v", got, tt.want)
			}
			if sel, err := ParseSelector(s.Info().UUID); err != nil || !sel.IsUUID() {
				t.Errorf("UUID %q does not parse as a GPU UUID: %v", s.Info().UUID, err)
			}
			if !s.Health().Healthy {
				t.Errorf("Health() = %v, want healthy", s.Health())
			}
		})
	}
}

func TestSimUUIDIsStable(t *testing.T) {
	t.Parallel()
	h200 := simUUID("NVIDIA H200", 0)
	if got := simUUID("NVIDIA H200", 0); got != h200 {
		t.Errorf("simUUID of the same name and index: %q, then %q", h200, got)
	}
	if simUUID("NVIDIA H200", 1) == h200 {
		t.Errorf("simUUID of another index is the same, %q", h200)
	}
	if simUUID("NVIDIA L4", 0) == h200 {
		t.Errorf("simUUID of another name is the same, %q", h200)
	}
	if !strings.HasPrefix(h200, "GPU-") || len(h200) != 40 {
		t.Errorf("simUUID = %q, want GPU- and 36 characters", h200)
	}
}

func TestSimMemory(t *testing.T) {
	t.Parallel()
	type step struct {
		op      string // reserve, release
		id      string
		mib     uint64
		wantErr error
	}
	tests := []struct {
		name      string
		steps     []step
		wantFree  uint64
		wantProcs []Process
	}{
		{
			name:      "nothing reserved",
			wantFree:  1000,
			wantProcs: []Process{},
		},
		{
			name: "grants consume memory in order",
			steps: []step{
				{op: "reserve", id: "inference", mib: 300},
				{op: "reserve", id: "job-a", mib: 200},
			},
			wantFree: 500,
			wantProcs: []Process{
				{PID: simPIDBase, UsedMiB: 300, Grant: "inference"},
				{PID: simPIDBase + 1, UsedMiB: 200, Grant: "job-a"},
			},
		},
		{
			name: "release returns memory",
			steps: []step{
				{op: "reserve", id: "job-a", mib: 600},
				{op: "release", id: "job-a"},
				{op: "reserve", id: "job-b", mib: 1000},
			},
			wantFree:  0,
			wantProcs: []Process{{PID: simPIDBase + 1, UsedMiB: 1000, Grant: "job-b"}},
		},
		{
			name: "too big",
			steps: []step{
				{op: "reserve", id: "job-a", mib: 600},
				{op: "reserve", id: "job-b", mib: 401, wantErr: ErrInsufficientMemory},
			},
			wantFree:  400,
			wantProcs: []Process{{PID: simPIDBase, UsedMiB: 600, Grant: "job-a"}},
		},
		{
			name: "same grant twice",
			steps: []step{
				{op: "reserve", id: "job-a", mib: 10},
				{op: "reserve", id: "job-a", mib: 10, wantErr: ErrGrantExists},
			},
			wantFree:  990,
			wantProcs: []Process{{PID: simPIDBase, UsedMiB: 10, Grant: "job-a"}},
		},
		{
			name:      "release unknown",
			steps:     []step{{op: "release", id: "job-z", wantErr: ErrUnknownGrant}},
			wantFree:  1000,
			wantProcs: []Process{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSim(t, func(c *Config) { c.Sim.MemoryMiB = 1000 })
			for i, st := range tt.steps {
				var err error
				if st.op == "reserve" {
					err = s.Reserve(st.id, st.mib)
				} else {
					err = s.Release(st.id)
				}
				if !errors.Is(err, st.wantErr) {
					t.Fatalf("step %d %s %s: error %v, want %v", i, st.op, st.id, err, st.wantErr)
				}
			}
			got, err := s.State(context.Background())
			if err != nil {
				t.Fatalf("State: %v", err)
			}
			want := Memory{TotalMiB: 1000, UsedMiB: 1000 - tt.wantFree, FreeMiB: tt.wantFree}
			if got.Memory != want {
				t.Errorf("Memory = %+v, want %+v", got.Memory, want)
			}
			if !reflect.DeepEqual(got.Processes, tt.wantProcs) {
				t.Errorf("Processes = %+v, want %+v", got.Processes, tt.wantProcs)
			}
			if got.ComputeMode != ComputeModeDefault || got.Utilization.Known || got.MIG.Supported {
				t.Errorf("State = %+v, want compute mode default, utilization unknown, no MIG", got)
			}
		})
	}
}

func TestSimHealth(t *testing.T) {
	t.Parallel()
	log, buf := newTestLogger()
	s, err := NewSim(simConfig(nil), Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Injected before Run: waits in the queue.
	if err := s.InjectXID(31); err != nil {
		t.Fatalf("InjectXID: %v", err)
	}
	stop := runDevice(t, s)

	steps := []struct {
		name        string
		do          func() error
		wantXID     uint64
		wantApp     bool
		wantChanged bool
		wantHealthy bool
	}{
		{name: "queued application xid", do: func() error { return nil }, wantXID: 31, wantApp: true, wantHealthy: true},
		{name: "fatal xid", do: func() error { return s.InjectXID(79) }, wantXID: 79, wantChanged: true},
		{name: "reset", do: s.ResetHealth, wantChanged: true, wantHealthy: true},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		e := nextEvent(t, s.Events())
		if e.XID != st.wantXID || e.AppXID != st.wantApp || e.Changed != st.wantChanged || e.Health.Healthy != st.wantHealthy {
			t.Errorf("%s: event %+v, want xid %d app %v changed %v healthy %v",
				st.name, e, st.wantXID, st.wantApp, st.wantChanged, st.wantHealthy)
		}
		if got := s.Health().Healthy; got != st.wantHealthy {
			t.Errorf("%s: Health().Healthy = %v", st.name, got)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v", err)
	}
	waitClosed(t, s.Events())
	for _, want := range []string{"application xid", "gpu unhealthy", "xid 79 (GPU has fallen off the bus)", "simulated gpu healthy again"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf)
		}
	}
	if err := s.InjectXID(0); err == nil {
		t.Error("InjectXID(0) succeeded, want an error")
	}
}

func TestSimClosed(t *testing.T) {
	t.Parallel()
	s := newTestSim(t, nil)
	if err := s.Reserve("job", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
	}{
		{name: "State", call: func() error { _, err := s.State(context.Background()); return err }},
		{name: "Reserve", call: func() error { return s.Reserve("other", 1) }},
		{name: "InjectXID", call: func() error { return s.InjectXID(79) }},
		{name: "Run", call: func() error { return s.Run(context.Background()) }},
		{name: "Close again", call: func() error {
			if err := s.Close(); err != nil {
				return err
			}
			return ErrClosed
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", tt.name, err)
			}
		})
	}
	if _, ok := <-s.Events(); ok {
		t.Error("Events open after Close")
	}
}

func TestSimInjectQueueFull(t *testing.T) {
	t.Parallel()
	s := newTestSim(t, nil)
	for i := 0; i < simQueue; i++ {
		if err := s.InjectXID(13); err != nil {
			t.Fatalf("InjectXID #%d: %v", i, err)
		}
	}
	if err := s.InjectXID(13); err == nil {
		t.Error("InjectXID on a full queue succeeded, want an error")
	}
}
