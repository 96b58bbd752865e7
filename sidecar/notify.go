package sidecar

import (
	"context"
	"time"

	"github.com/colocd/colocd/internal/sdnotify"
)

// notifyEvery is how often readiness is told to the service manager.
const notifyEvery = 500 * time.Millisecond

// notifyManager tells systemd (Type=notify, docs/operations.md#systemd)
// that the sidecar is ready once /readyz would say so, its status line
// whenever readiness changes, and that it is stopping when ctx ends.
// Without $NOTIFY_SOCKET it returns at once.
func (s *Sidecar) notifyManager(ctx context.Context) error {
	if sent, err := sdnotify.Notify("STATUS=starting sidecar " + s.id); !sent {
		if err != nil {
			s.log.Warn("systemd notify", "err", err)
		}
		return nil
	}
	t := time.NewTicker(notifyEvery)
	defer t.Stop()
	ready, last := false, ""
	for {
		status := "serving sidecar " + s.id
		err := s.Ready()
		if err != nil {
			status = "not ready: " + err.Error()
		}
		if status != last {
			msgs := []string{"STATUS=" + oneLine(status)}
			if err == nil && !ready {
				msgs = append(msgs, sdnotify.Ready)
				ready = true
			}
			if _, err := sdnotify.Notify(msgs...); err != nil {
				s.log.Warn("systemd notify", "err", err)
			}
			last = status
		}
		select {
		case <-ctx.Done():
			if _, err := sdnotify.Notify(sdnotify.Stopping, "STATUS=stopping: the leases stay in JetStream"); err != nil {
				s.log.Warn("systemd notify", "err", err)
			}
			return nil
		case <-t.C:
		}
	}
}

// oneLine is s with its line breaks as spaces, and cut at 512 bytes.
func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	if len(b) > 512 {
		b = b[:512]
	}
	return string(b)
}
