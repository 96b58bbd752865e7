package gpu

import (
	"testing"
	"time"
)

func TestMonitorDropsOldestEvents(t *testing.T) {
	t.Parallel()
	m := newMonitor(time.Now())
	const n = eventBuffer + 7
	for i := 1; i <= n; i++ {
		m.xid(13, time.Now()) // application XIDs: one event each
	}
	m.xid(79, time.Now())
	m.close()
	var got []uint64
	for e := range m.events {
		got = append(got, e.XID)
	}
	if len(got) != eventBuffer {
		t.Fatalf("%d events kept, want %d", len(got), eventBuffer)
	}
	if last := got[len(got)-1]; last != 79 {
		t.Errorf("newest event has XID %d, want 79: the newest must survive an overflow", last)
	}
	m.xid(48, time.Now()) // after close: dropped, no panic
}

func TestMonitorTransitions(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(100, 0)
	tests := []struct {
		name        string
		steps       func(m *monitor)
		wantHealthy bool
		wantReason  string
		wantFault   bool // the device itself failed
	}{
		{name: "new is healthy", steps: func(*monitor) {}, wantHealthy: true},
		{
			name:        "non-sticky failure recovers",
			steps:       func(m *monitor) { m.fail("reads failing", false, t0); m.recover(t0) },
			wantHealthy: true,
		},
		{
			name:       "sticky failure does not recover",
			steps:      func(m *monitor) { m.fail("gpu is lost", true, t0); m.recover(t0) },
			wantReason: "gpu is lost",
			wantFault:  true,
		},
		{
			name:       "failing reads are no fault",
			steps:      func(m *monitor) { m.fail("reads failing", false, t0) },
			wantReason: "reads failing",
		},
		{
			name:       "xid replaces a non-sticky failure and stays",
			steps:      func(m *monitor) { m.fail("reads failing", false, t0); m.xid(79, t0); m.recover(t0) },
			wantReason: "xid 79 (GPU has fallen off the bus)",
			wantFault:  true,
		},
		{
			name:       "a sticky failure keeps its first reason",
			steps:      func(m *monitor) { m.xid(48, t0); m.fail("gpu is lost", true, t0) },
			wantReason: "xid 48 (double bit ECC error)",
			wantFault:  true,
		},
		{
			name:        "reset clears even a sticky failure",
			steps:       func(m *monitor) { m.xid(79, t0); m.reset(t0) },
			wantHealthy: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMonitor(t0)
			tt.steps(m)
			h := m.current()
			if h.Healthy != tt.wantHealthy || h.Reason != tt.wantReason || h.Fault != tt.wantFault {
				t.Errorf("health = %+v, want healthy=%v reason %q fault=%v", h, tt.wantHealthy, tt.wantReason, tt.wantFault)
			}
			if got, want := h.String(), "healthy"; tt.wantHealthy && got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
			m.close()
		})
	}
}
