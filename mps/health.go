package mps

import (
	"fmt"
	"sync"
	"time"
)

// State is the health of the MPS daemon as colocd sees it.
type State int

// The health states. Only StateReady allows new co-location.
const (
	// StateUnknown: not probed yet, or the daemon's answer was not understood.
	StateUnknown State = iota
	// StateReady: the daemon answers and no server is in FAULT.
	StateReady
	// StateFault: a server reports FAULT, or a fault line appeared in
	// control.log or server.log since the last probe.
	StateFault
	// StateUnresponsive: the daemon runs but a probe timed out or failed.
	StateUnresponsive
	// StateDown: no daemon runs for the pipe directory.
	StateDown
)

var stateNames = [...]string{"unknown", "ready", "fault", "unresponsive", "down"}

// String returns the state's lowercase name, as /status and logs show it.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("state(%d)", int(s))
	}
	return stateNames[s]
}

// MarshalText writes the state's name in JSON and YAML.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ServerHealth is one server's state at the last probe.
type ServerHealth struct {
	PID   PID         `json:"pid"`
	State ServerState `json:"state"`
	// UID is the user the server serves (its real UID); nil when it could
	// not be read (the server runs in another PID namespace).
	UID *UID `json:"uid,omitempty"`
}

// Health is the daemon's health at the last probe.
type Health struct {
	State   State          `json:"state"`
	Reason  string         `json:"reason"`            // one sentence: why this state
	Daemon  PID            `json:"daemon,omitempty"`  // the daemon last seen, 0 if none
	Started bool           `json:"started"`           // this colocd started the daemon
	Owned   bool           `json:"owned"`             // colocd started it (now or before a restart); it is restarted if it dies
	Servers []ServerHealth `json:"servers,omitempty"` // servers at the last probe
	Since   time.Time      `json:"since"`             // when State last changed
	Checked time.Time      `json:"checked"`           // when it was last probed
}

// Ready reports whether new co-location is allowed.
func (h Health) Ready() bool { return h.State == StateReady }

// User is the user the daemon's server serves at the last probe: the UID
// of the first server whose user is known. An MPS server serves one user:
// a client of another user waits at CUDA init until every client of the
// running server has exited (docs/mps.md#one-user). ok is false when no
// server runs or no server's user could be read.
func (h Health) User() (uid UID, server PID, ok bool) {
	return firstUser(h.Servers)
}

func firstUser(servers []ServerHealth) (UID, PID, bool) {
	for _, s := range servers {
		if s.UID != nil {
			return *s.UID, s.PID, true
		}
	}
	return 0, 0, false
}

// eventBuffer is the size of a subscriber's channel. When it is full the
// oldest event is dropped, so the newest state always arrives.
const eventBuffer = 8

// healthTracker holds the current Health and its subscribers.
type healthTracker struct {
	mu   sync.Mutex
	cur  Health
	subs map[chan Health]struct{}
}

func (t *healthTracker) get() Health {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// set records h and, if its State differs from the current one, sends it to
// every subscriber. It returns the previous Health and whether State changed.
func (t *healthTracker) set(h Health) (Health, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.cur
	if h.Checked.IsZero() {
		h.Checked = time.Now()
	}
	changed := h.State != prev.State || prev.Since.IsZero()
	if changed {
		h.Since = h.Checked
	} else {
		h.Since = prev.Since
	}
	t.cur = h
	if changed {
		for ch := range t.subs {
			select {
			case ch <- h:
			default:
				// Full: drop the oldest event. The tracker is the only
				// sender and holds mu, so there is room afterwards.
				select {
				case <-ch:
				default:
				}
				ch <- h
			}
		}
	}
	return prev, changed
}

// subscribe returns a channel of state changes and a function that ends the
// subscription and closes the channel.
func (t *healthTracker) subscribe() (<-chan Health, func()) {
	ch := make(chan Health, eventBuffer)
	t.mu.Lock()
	if t.subs == nil {
		t.subs = map[chan Health]struct{}{}
	}
	t.subs[ch] = struct{}{}
	t.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			t.mu.Lock()
			delete(t.subs, ch)
			t.mu.Unlock()
			close(ch)
		})
	}
}
