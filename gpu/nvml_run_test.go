package gpu

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestRunXIDHealth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		xids        []uint64
		wantApp     []bool // per XID
		wantChanged []bool // per XID
		wantHealthy bool
		wantXID     uint64 // Health().XID at the end
		wantReason  string
	}{
		{
			name:        "application xids keep the device healthy",
			xids:        []uint64{13, 31, 43, 45, 68, 109},
			wantApp:     []bool{true, true, true, true, true, true},
			wantChanged: []bool{false, false, false, false, false, false},
			wantHealthy: true,
		},
		{
			name:        "xid 79 makes the device unhealthy",
			xids:        []uint64{79},
			wantApp:     []bool{false},
			wantChanged: []bool{true},
			wantXID:     79,
			wantReason:  "xid 79 (GPU has fallen off the bus)",
		},
		{
			name:        "an unlisted xid makes the device unhealthy",
			xids:        []uint64{31, 1234},
			wantApp:     []bool{true, false},
			wantChanged: []bool{false, true},
			wantXID:     1234,
			wantReason:  "xid 1234 (see NVIDIA's Xid catalog)",
		},
		{
			name:        "the first fatal xid stays the reason",
			xids:        []uint64{48, 13, 95},
			wantApp:     []bool{false, true, false},
			wantChanged: []bool{true, false, false},
			wantXID:     48,
			wantReason:  "xid 48 (double bit ECC error)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newDGX(t)
			d := openMock(t, x, "2")
			stop := runDevice(t, d)
			for i, xid := range tt.xids {
				x.sendXID(2, xid)
				e := nextEvent(t, d.Events())
				if e.XID != xid || e.AppXID != tt.wantApp[i] || e.Changed != tt.wantChanged[i] {
					t.Errorf("event %d = {XID:%d AppXID:%v Changed:%v}, want {XID:%d AppXID:%v Changed:%v}",
						i, e.XID, e.AppXID, e.Changed, xid, tt.wantApp[i], tt.wantChanged[i])
				}
				if e.Health != d.Health() {
					t.Errorf("event %d health %v, Health() %v", i, e.Health, d.Health())
				}
			}
			if err := stop(); err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
			waitClosed(t, d.Events())
			h := d.Health()
			if h.Healthy != tt.wantHealthy || h.XID != tt.wantXID || h.Reason != tt.wantReason || h.Since.IsZero() {
				t.Errorf("Health() = %+v, want healthy=%v xid=%d reason %q", h, tt.wantHealthy, tt.wantXID, tt.wantReason)
			}
			if n := len(x.set.FreeCalls()); n != 1 {
				t.Errorf("event set freed %d times, want 1", n)
			}
			var registered uint64
			for _, c := range x.device(2).RegisterEventsCalls() {
				registered |= c.V
			}
			if registered != nvml.EventTypeXidCriticalError {
				t.Errorf("registered events %#x, want only XidCriticalError", registered)
			}
		})
	}
}

func TestRunIgnoresOtherEvents(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	d := openMock(t, x, "0")
	runDevice(t, d)
	x.xids <- nvml.EventData{Device: x.Devices[0], EventType: nvml.EventTypeSingleBitEccError, EventData: 79}
	x.sendXID(3, 79) // another GPU's event
	x.sendXID(0, 31)
	if e := nextEvent(t, d.Events()); e.XID != 31 {
		t.Errorf("first event has XID %d, want 31: other devices' and other types' events must be ignored", e.XID)
	}
	if !d.Health().Healthy {
		t.Errorf("Health() = %v, want healthy", d.Health())
	}
}

func TestRunWithoutXIDEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(x *dgx)
		wantLog string
	}{
		{
			name: "event types unsupported",
			setup: func(x *dgx) {
				x.device(0).GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			},
			wantLog: "xid events unavailable",
		},
		{
			name: "xid not among supported events",
			setup: func(x *dgx) {
				x.device(0).GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
					return nvml.EventTypeSingleBitEccError, nvml.SUCCESS
				}
			},
			wantLog: "xid events not supported by this device",
		},
		{
			name: "event set cannot be created",
			setup: func(x *dgx) {
				x.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }
			},
			wantLog: "nvml create event set: unknown error",
		},
		{
			name: "registration fails",
			setup: func(x *dgx) {
				x.device(0).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
			},
			wantLog: "nvml register xid events",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newDGX(t)
			tt.setup(x)
			lost := fakeLoss(x.device(0))
			log, buf := newTestLogger()
			d, err := OpenNVML(context.Background(), x, testConfig("0"), Options{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			stop := runDevice(t, d)

			// Without XID events the liveness check still notices a lost GPU.
			lost.Store(true)
			e := nextEvent(t, d.Events())
			if !e.Changed || e.Health.Healthy || !strings.Contains(e.Health.Reason, "gpu is lost") {
				t.Errorf("event = %+v, want a change to unhealthy: gpu is lost", e)
			}
			if err := stop(); err != nil {
				t.Errorf("Run = %v", err)
			}
			for _, want := range []string{tt.wantLog, "health rests on the liveness check", "xid_events=false"} {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, buf)
				}
			}
		})
	}
}

// fakeLoss makes dev's memory query fail with GPU_IS_LOST once the returned
// flag is set. Call it before Run starts.
func fakeLoss(d *serverDevice) *atomic.Bool {
	var lost atomic.Bool
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if lost.Load() {
			return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
		}
		return nvml.Memory{Total: h200MiB << 20, Free: h200MiB << 20}, nvml.SUCCESS
	}
	return &lost
}

func TestRunGPULostIsSticky(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	lost := fakeLoss(x.device(0))
	d := openMock(t, x, "0")
	runDevice(t, d)
	lost.Store(true)
	e := nextEvent(t, d.Events())
	if !e.Changed || e.Health.Healthy {
		t.Fatalf("event = %+v, want a change to unhealthy", e)
	}
	lost.Store(false)
	x.sendXID(0, 13) // a later event proves the loop went on without recovering
	e = nextEvent(t, d.Events())
	if e.XID != 13 || e.Health.Healthy {
		t.Errorf("event = %+v, want xid 13 on a still unhealthy device", e)
	}
}

func TestRunWaitFailuresRecover(t *testing.T) {
	t.Parallel()
	x := newDGX(t)
	var failing atomic.Int32
	failing.Store(failuresBeforeUnhealthy)
	wait := x.set.WaitFunc
	x.set.WaitFunc = func(ms uint32) (nvml.EventData, nvml.Return) {
		if failing.Add(-1) >= 0 {
			return nvml.EventData{}, nvml.ERROR_UNKNOWN
		}
		return wait(ms)
	}
	log, buf := newTestLogger()
	d, err := OpenNVML(context.Background(), x, testConfig("0"), Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	runDevice(t, d)

	down := nextEvent(t, d.Events())
	if !down.Changed || down.Health.Healthy || !strings.Contains(down.Health.Reason, "nvml reads failing: nvml wait for events: unknown error") {
		t.Errorf("first event = %+v, want a change to unhealthy after %d failed waits", down, failuresBeforeUnhealthy)
	}
	up := nextEvent(t, d.Events())
	if !up.Changed || !up.Health.Healthy {
		t.Errorf("second event = %+v, want a change back to healthy", up)
	}
	if !strings.Contains(buf.String(), "failures=3") {
		t.Errorf("log lacks the failure count:\n%s", buf)
	}
}

func TestRunLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("second Run", func(t *testing.T) {
		x := newDGX(t)
		d := openMock(t, x, "0")
		runDevice(t, d)
		x.sendXID(0, 31)
		nextEvent(t, d.Events()) // the first Run is running
		if err := d.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
			t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
		}
	})
	t.Run("Run after Close", func(t *testing.T) {
		d := openMock(t, newDGX(t), "0")
		d.Close()
		if err := d.Run(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Run = %v, want ErrClosed", err)
		}
	})
	t.Run("Close stops Run", func(t *testing.T) {
		x := newDGX(t)
		d := openMock(t, x, "0")
		done := make(chan error, 1)
		go func() { done <- d.Run(context.Background()) }()
		x.sendXID(0, 31)
		nextEvent(t, d.Events()) // Run is running
		if err := d.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		waitClosed(t, d.Events())
		if n := len(x.set.FreeCalls()); n != 1 {
			t.Errorf("event set freed %d times, want 1", n)
		}
		if n := len(x.ShutdownCalls()); n != 1 {
			t.Errorf("Shutdown called %d times, want 1", n)
		}
	})
}
