package predictor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (the
// calibration simulates records on worker goroutines).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
