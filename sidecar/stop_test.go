package sidecar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// A stop answers every request it received: decided, or a 503 that says
// the sidecar is stopping and nothing was done. None is left to time out.
func TestStopAnswersEveryQueuedRequest(t *testing.T) {
	t.Parallel()
	// A server of its own, so that the launcher's connection outlives
	// the sidecar (an embedded server would end with it).
	ns := natstest.Start(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()})
	cfg := testConfig(t, "gpu-stop", 10000)
	cfg.NATS.URL = ns.ClientURL()
	cfg.Admission.MaxJobs = 64
	s := start(t, cfg, Options{})
	c := bus.NewClient(natstest.Connect(t, ns), bus.WithTimeout(30*time.Second))
	const n = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered, stopping, gone := 0, 0, 0
	var lost []string
	sent := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			req := admitReq(fmt.Sprintf("queued-%d", i), 10, 100)
			sent <- struct{}{}
			_, err := c.Admit(context.Background(), s.ID(), req)
			mu.Lock()
			defer mu.Unlock()
			var werr *v1.Error
			switch {
			case err == nil:
				answered++
			case errors.As(err, &werr) && werr.Code == 503:
				stopping++
			case errors.Is(err, v1.ErrNoSidecar):
				gone++ // sent once the sidecar had stopped listening: told at once
			default:
				lost = append(lost, fmt.Sprintf("admit %d: %v", i, err))
			}
		})
	}
	for range n {
		<-sent
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s.stop = func() error { return nil }
	wg.Wait()
	t.Logf("%d decided, %d answered 503 stopping, %d sent after it stopped listening (no responders), %d unanswered", answered, stopping, gone, len(lost))
	for _, l := range lost {
		t.Error(l)
	}
}
