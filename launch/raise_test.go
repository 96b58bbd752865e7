package launch

import (
	"io"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
)

// A job granted its min_pct until the sidecar had measured its servers
// (measure_first) takes the raise that follows without --take-raises: it
// is the percentage the job was to have. Later raises, and raises of a job
// throttled for another reason, follow --take-raises.
func TestMeasureFirstRaiseIsTaken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		code       string
		take       bool
		want, then int // the percentage after the first raise, after a second
	}{
		{"measure first", v1.ReasonMeasureFirst, false, 50, 50},
		{"measure first, take raises", v1.ReasonMeasureFirst, true, 50, 100},
		{"throttled to fit", "throttled_to_fit", false, 10, 10},
		{"throttled to fit, take raises", "throttled_to_fit", true, 50, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var events []string
			s := &supervisor{cfg: Config{TakeRaises: tt.take}, rep: &reporter{w: io.Discard, hook: func(r Record) { events = append(events, r.Event) }}}
			s.take(&Grant{Sidecar: "gpu", Decision: &v1.Decision{Decision: v1.DecisionThrottle, Reason: v1.Reason{Code: tt.code},
				Lease: &v1.Lease{ID: "L", JobID: "job", ActiveThreadPct: 10, ExpiresAt: time.Now().Add(time.Minute)}}})
			raise := func(pct int) {
				s.onEvent(bus.EventRecord{Event: v1.Event{Type: v1.EventRaise, LeaseID: "L", ActiveThreadPct: pct}}, true)
			}
			raise(50)
			if s.pct != tt.want {
				t.Errorf("after a raise to 50 %%: at %d %%, want %d (records %v)", s.pct, tt.want, events)
			}
			raise(100)
			if s.pct != tt.then {
				t.Errorf("after a second raise, to 100 %%: at %d %%, want %d (records %v)", s.pct, tt.then, events)
			}
		})
	}
}
