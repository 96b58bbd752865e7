package syncio

import (
	"strings"
	"sync"
	"testing"
)

// Writes from many goroutines all land, whole, in the buffer, through a
// Writer too, and the buffer can be read meanwhile.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b Buffer
	w := &Writer{W: &b}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				w.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 800 {
		t.Errorf("%d lines, want 800", got)
	}
}
