// Package runtest runs, in a test, a component's Run loop in the
// background until the test ends, and checks how it ended: a loop that
// returns an error on a clean stop, or does not stop, fails the test.
package runtest

import (
	"context"
	"testing"
	"time"
)

// stopTimeout is how long a stopped loop may take to return: long, so
// that a loaded machine does not fail the test.
const stopTimeout = time.Minute

// Background runs run in a goroutine with a context that is cancelled
// when the test ends; then it waits for run to return, and fails t if it
// returned an error or did not return within a minute.
func Background(t testing.TB, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Error("Run did not return")
		}
	})
}
