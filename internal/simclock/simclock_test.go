package simclock

import (
	"sync"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	c.Advance(90 * time.Second)
	if got := c.Now(); got.Sub(t0) != 90*time.Second {
		t.Fatalf("after Advance(90s): %v after the start", got.Sub(t0))
	}
	c.Set(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("after Set: %v, want %v", got, t0)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { c.Advance(time.Second); _ = c.Now() })
	}
	wg.Wait()
	if got := c.Now().Sub(t0); got != 8*time.Second {
		t.Fatalf("eight concurrent Advance(1s): %v, want 8s", got)
	}
	var zero Clock
	if !zero.Now().IsZero() {
		t.Fatalf("the zero Clock reads %v, want the zero time", zero.Now())
	}
}
