package sidecar

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	"github.com/colocd/colocd/bus"
	"github.com/nats-io/nats.go"
)

// identityNamed adds launcher identity name to the launchers directory
// under dataDir and returns the path of its seed, for connAs or dialAs
// once the sidecar runs.
func identityNamed(t *testing.T, dataDir, name string) string {
	t.Helper()
	seed, _, err := natsserver.AddLauncher(filepath.Join(dataDir, "launchers"), name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func dialAs(t *testing.T, s *running, seed string) *bus.Client {
	t.Helper()
	return bus.NewClient(connAs(t, s, seed), bus.WithTimeout(60*time.Second))
}

// connAs is a connection of the launcher whose seed is seed, closed when
// the test ends.
func connAs(t *testing.T, s *running, seed string) *nats.Conn {
	t.Helper()
	auth, err := bus.LauncherAuth(seed, "")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.ClientURL(), auth...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// A launcher's status shows its own leases in full and another identity's
// as its share of the GPU alone: no id, job, owner, environment or
// processes.
func TestStatusHidesOtherIdentities(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-private", 10000)
	seed := identityNamed(t, cfg.Sidecar.DataDir, "vision")
	s := start(t, cfg, Options{})
	honest, other := client(t, s), dialAs(t, s, seed)
	ctx := context.Background()
	mine := leasedInFull(ctx, t, honest, s.ID(), admitReq("job-honest", 10, 100))
	theirs := admitReq("job-vision", 10, 100)
	theirs.Job.Owner = "vision-team"
	if d, err := other.Admit(ctx, s.ID(), theirs); err != nil || d.Lease == nil {
		t.Fatalf("vision's admit: %v %+v", err, d)
	}
	st, err := other.Status(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Leases) != 2 {
		t.Fatalf("vision sees %d leases, want 2 (its own and a count of the other)", len(st.Leases))
	}
	var own, hidden int
	for _, l := range st.Leases {
		switch {
		case l.JobID == "job-vision":
			own++
			if l.Owner != "vision-team" || l.ID == "" || len(l.Env) == 0 {
				t.Errorf("vision's own lease shown as %+v, want it in full", l)
			}
		default:
			hidden++
			if l.ID != "" || l.JobID != "" || l.Owner != "" || len(l.Env) != 0 || len(l.PIDs) != 0 {
				t.Errorf("the honest lease shown to vision as %+v: id, job, owner, env and pids must be hidden", l)
			}
			if l.ActiveThreadPct != mine.Lease.ActiveThreadPct || l.PinnedMemLimitMiB != mine.Lease.PinnedMemLimitMiB || l.State == "" {
				t.Errorf("the honest lease shown to vision as %+v, want its share %d %% and %d MiB and its state", l,
					mine.Lease.ActiveThreadPct, mine.Lease.PinnedMemLimitMiB)
			}
		}
	}
	if own != 1 || hidden != 1 {
		t.Errorf("vision's status: %d own, %d hidden leases, want 1 and 1", own, hidden)
	}
}
