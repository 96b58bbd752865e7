package runtest

import (
	"context"
	"errors"
	"testing"
)

func TestBackgroundStopReturnsWhatRunReturned(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	stop := Background(func(ctx context.Context) error {
		<-ctx.Done()
		return boom
	})
	for range 2 {
		if err := stop(); !errors.Is(err, boom) {
			t.Errorf("stop = %v, want %v on every call", err, boom)
		}
	}
}
