// Package runtest runs, in tests, a loop that runs until its context ends
// (a Run method), and checks how it ended.
package runtest

import (
	"context"
	"sync"
	"testing"
)

// Background runs run in a goroutine until stop cancels its context; stop
// waits for it and returns what it returned, the same on every call.
func Background(run func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
}

// UntilCleanup runs run until the test ends, and fails the test if it
// returned an error. (In a synctest bubble the cleanup runs inside it.)
func UntilCleanup(t testing.TB, run func(context.Context) error) {
	stop := Background(run)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}
