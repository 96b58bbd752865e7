package launch

import (
	"fmt"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"
)

// What waiting may cure is asked again; what it cannot is not.
func TestRetryable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{v1.Unavailable("not ready"), true},
		{v1.TooManyRequests("past the rate"), true},
		{v1.Timeout("deadline"), true},
		{fmt.Errorf("admit: %w", v1.ErrNoAnswer), true},
		{v1.ErrNoSidecar, true},
		{v1.BadRequest("profile: bad"), false},
		{v1.Forbidden("token"), false},
		{v1.Conflict("request id"), false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
