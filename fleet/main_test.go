package fleet

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test shuts down its servers and connections; nothing may linger.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
