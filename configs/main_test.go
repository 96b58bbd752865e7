package configs

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (a
// watcher's Run, fsnotify's reader).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
