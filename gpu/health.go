package gpu

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Health is whether the device can take work. A device starts healthy; any
// XID that is not an application-level one (see IsAppXID) makes it
// unhealthy for as long as it stays open, as does a lost GPU. A run of
// failing NVML reads makes it unhealthy until a read succeeds again.
type Health struct {
	Healthy bool
	// Reason says why the device is unhealthy; "" when healthy.
	Reason string
	// XID is the XID that made the device unhealthy; 0 otherwise.
	XID uint64
	// Fault is true when the device itself failed (a non-application XID,
	// a lost GPU): work on it is lost, not merely unobserved as when NVML
	// reads fail.
	Fault bool
	// Since is when the device entered this state.
	Since time.Time
}

// Event is one thing the health loop saw: an XID (XID > 0), or a health
// change without one. Events are a notification: when the reader falls
// behind, the oldest unread events are dropped, and Health() is always
// current.
type Event struct {
	Time time.Time
	// XID is the XID reported by the driver; 0 for a health change that
	// has no XID (a lost GPU, failing NVML reads, a recovery).
	XID uint64
	// AppXID is true for an application-level XID: the workload's fault
	// (under MPS, a fault in one client is reported to every client); the
	// device stays healthy.
	AppXID bool
	// Changed is true when this event changed the device's health.
	Changed bool
	// Health is the device's health after the event.
	Health Health
}

// eventBuffer is how many unread events a device keeps.
const eventBuffer = 64

// monitor holds a device's health and its event channel. Every method is
// safe for concurrent use; only the device's Run loop changes health.
type monitor struct {
	mu     sync.Mutex
	health Health
	sticky bool // health cannot return to healthy
	events chan Event
	closed bool
}

func newMonitor(now time.Time) *monitor {
	return &monitor{
		health: Health{Healthy: true, Since: now},
		events: make(chan Event, eventBuffer),
	}
}

// current returns the health now.
func (m *monitor) current() Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.health
}

// xid applies the XID rule and publishes the event.
func (m *monitor) xid(xid uint64, at time.Time) Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := Event{Time: at, XID: xid, AppXID: IsAppXID(xid)}
	if !e.AppXID && (m.health.Healthy || !m.sticky) {
		m.health = Health{Reason: XIDText(xid), XID: xid, Fault: true, Since: at}
		m.sticky = true
		e.Changed = true
	}
	e.Health = m.health
	m.publishLocked(e)
	return e
}

// fail marks the device unhealthy. A sticky failure never clears. It does
// nothing, and returns false, when the device is already unhealthy for a
// reason that stays (or for the same reason).
func (m *monitor) fail(reason string, sticky bool, at time.Time) (Event, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.health.Healthy && (m.sticky || !sticky && m.health.Reason == reason) {
		return Event{}, false
	}
	m.health = Health{Reason: reason, Fault: sticky, Since: at}
	m.sticky = sticky
	e := Event{Time: at, Changed: true, Health: m.health}
	m.publishLocked(e)
	return e, true
}

// recover clears an unhealthy state that is not sticky.
func (m *monitor) recover(at time.Time) (Event, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.health.Healthy || m.sticky {
		return Event{}, false
	}
	return m.resetLocked(at), true
}

// reset makes the device healthy whatever the cause (the simulated
// device's ResetHealth).
func (m *monitor) reset(at time.Time) (Event, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.health.Healthy {
		return Event{}, false
	}
	return m.resetLocked(at), true
}

// resetLocked makes the device healthy and publishes the change.
func (m *monitor) resetLocked(at time.Time) Event {
	m.health = Health{Healthy: true, Since: at}
	m.sticky = false
	e := Event{Time: at, Changed: true, Health: m.health}
	m.publishLocked(e)
	return e
}

// publishLocked sends e without blocking, dropping the oldest unread event
// when the buffer is full. The mutex makes this the only sender.
func (m *monitor) publishLocked(e Event) {
	if m.closed {
		return
	}
	select {
	case m.events <- e:
		return
	default:
	}
	select {
	case <-m.events:
	default:
	}
	select {
	case m.events <- e:
	default:
	}
}

// close closes the event channel; later events are dropped.
func (m *monitor) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		close(m.events)
	}
}

// String formats a health value for logs and status pages.
func (h Health) String() string {
	if h.Healthy {
		return "healthy"
	}
	return fmt.Sprintf("unhealthy: %s", h.Reason)
}

// logXID logs an XID event the way both devices' Run loops do.
func logXID(log *slog.Logger, e Event) {
	switch {
	case e.AppXID:
		log.Info("application xid; device stays healthy", "xid", e.XID, "what", XIDText(e.XID))
	case e.Changed:
		log.Error("gpu unhealthy", "xid", e.XID, "reason", e.Health.Reason)
	default:
		log.Warn("xid on an unhealthy gpu", "xid", e.XID, "what", XIDText(e.XID))
	}
}
