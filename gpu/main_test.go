package gpu

import (
	"log/slog"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/syncio"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newTestLogger() (*slog.Logger, *syncio.Buffer) {
	b := &syncio.Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// eventTimeout bounds how long a test waits for an event that must come.
// Only a failing test ever waits this long.
const eventTimeout = 10 * time.Second

func nextEvent(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("events closed, want an event")
		}
		return e
	case <-time.After(eventTimeout):
		t.Fatal("no event")
	}
	return Event{}
}

// waitClosed waits for Run to close the events channel, skipping events.
func waitClosed(t *testing.T, ch <-chan Event) {
	t.Helper()
	timeout := time.After(eventTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("events not closed")
		}
	}
}
