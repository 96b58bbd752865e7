package launch

import (
	"fmt"
	"testing"

	"github.com/colocd/colocd/bus"
)

// What waiting may cure is asked again; what it cannot is not.
func TestRetryable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{bus.Unavailable("not ready"), true},
		{bus.TooManyRequests("past the rate"), true},
		{bus.Timeout("deadline"), true},
		{fmt.Errorf("admit: %w", bus.ErrNoAnswer), true},
		{bus.ErrNoSidecar, true},
		{bus.BadRequest("profile: bad"), false},
		{bus.Forbidden("token"), false},
		{bus.Conflict("request id"), false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
