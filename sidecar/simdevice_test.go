package sidecar

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/mps"
	"github.com/google/go-cmp/cmp"
)

// shown is what a simulated GPU and daemon show of the leases.
type shown struct {
	UsedMiB uint64
	Clients map[mps.PID]float64 // active-thread percentage by PID
}

// TestSimDeviceShowsLeases: a simulated GPU uses a lease's memory from the
// moment its PIDs are registered or the visibility window has passed since
// its grant, whichever comes first, and not a moment before; the simulated
// daemon has one client per registered PID at the lease's percentage; a
// lease that ends gives both back. The window is the one admission uses,
// passed in: here not the default minute, so that a hard-coded one fails.
func TestSimDeviceShowsLeases(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g, err := gpu.NewSim(gpu.Config{Backend: gpu.BackendSim, Device: "0"}, gpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		daemon, err := mps.NewSim(mps.SimConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := daemon.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		gone := map[int]bool{}
		d := &simDevice{gpu: g, mps: daemon, log: slog.New(slog.DiscardHandler), exists: func(pid int) bool { return !gone[pid] }}
		cfg := admission.Config{VisibilityWindow: 90 * time.Second}
		show := func(leases ...admission.Lease) shown {
			t.Helper()
			d.show(leases, cfg.VisibilityWindow)
			st, err := g.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			clients, err := daemon.Clients(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := shown{UsedMiB: st.Memory.UsedMiB}
			for _, c := range clients {
				if got.Clients == nil {
					got.Clients = map[mps.PID]float64{}
				}
				got.Clients[c.PID] = c.ActiveThreadPct
			}
			return got
		}
		check := func(what string, want, got shown) {
			t.Helper()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", what, diff)
			}
		}

		quiet := admission.Lease{ID: "quiet", MemoryMiB: 1000, Pct: 40, CreatedAt: time.Now()}
		started := admission.Lease{ID: "started", MemoryMiB: 2000, Pct: 30, PIDs: []int{4242, 4243}, CreatedAt: time.Now()}
		registered := shown{UsedMiB: 2000, Clients: map[mps.PID]float64{4242: 30, 4243: 30}}
		check("at the grants", registered, show(quiet, started))
		time.Sleep(cfg.VisibilityWindow - time.Second)
		check("a second before the window ends", registered, show(quiet, started))
		time.Sleep(time.Second)
		check("when the window ends", shown{UsedMiB: 3000, Clients: registered.Clients}, show(quiet, started))
		// A process that exited is no client, while its lease still
		// lists it (a released lease is listed until its processes are
		// gone).
		gone[4243] = true
		check("after a worker exited", shown{UsedMiB: 3000, Clients: map[mps.PID]float64{4242: 30}}, show(quiet, started))
		gone[4243] = false
		check("after a release", shown{UsedMiB: 1000}, show(quiet))
		check("after the last release", shown{}, show())
	})
}
