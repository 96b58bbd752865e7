package launch

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestRunChecksTheMPSServersUser: a grant names the user the GPU's MPS
// server serves; run starts the command only as that user, since a CUDA
// process of another user would wait at CUDA init for as long as the
// server's clients (the inference server's) run. The lease is given back.
func TestRunChecksTheMPSServersUser(t *testing.T) {
	t.Parallel()
	n := newNode(t, 100000, "")
	me := os.Getuid()
	tests := []struct {
		name   string
		job    string
		server *int // the grant's mps_server_uid
		status int
		err    string // "" runs the command
	}{
		{name: "another user", job: "user-other", server: ptr(me + 1), status: 1,
			err: "the MPS server on gpu-run serves uid " + strconv.Itoa(me+1) + ", and this process runs as uid " + strconv.Itoa(me) + ": a CUDA process of another user than the server's waits at CUDA init"},
		{name: "the server's user", job: "user-same", server: ptr(me), status: 7},
		{name: "no server told", job: "user-none", status: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, recs, cfg, log := n.job("CHILD_SLEEP=10ms", "CHILD_EXIT=7")
			admit := n.admitter(c, tt.job, 0)
			told := func(ctx context.Context) (*Grant, error) {
				g, err := admit(ctx)
				if err == nil && g.Decision.Lease != nil {
					g.Decision.Lease.MPSServerUID = tt.server
				}
				return g, err
			}
			res, err := Run(context.Background(), cfg, c, told)
			if res.Status != tt.status {
				t.Errorf("status %d, want %d (err %v)", res.Status, tt.status, err)
			}
			if tt.err == "" {
				if err != nil || len(log.starts(t)) != 1 {
					t.Errorf("run: %v, %d starts; want the command run once", err, len(log.starts(t)))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("run: %v; want an error containing %q", err, tt.err)
			}
			t.Logf("refused: %v", err)
			if got := log.lines(t); len(got) != 0 {
				t.Errorf("the command ran: %q", got)
			}
			if len(recs.of("released")) != 1 {
				t.Errorf("the lease was not released:\n%s", recs)
			}
		})
	}
}

func ptr(v int) *int { return &v }
