package mps

import (
	"context"
	"errors"
	"testing"
)

// daemon is every method the sidecar may use, whichever of Control and Sim
// it was given. Consumers declare their own smaller interfaces (STYLE habit
// 1); this one only checks that the two stay interchangeable.
type daemon interface {
	Ensure(ctx context.Context) error
	Close(ctx context.Context) error
	Run(ctx context.Context) error
	Health() Health
	Subscribe() (<-chan Health, func())
	ServerPIDs(ctx context.Context) ([]PID, error)
	ServerStatus(ctx context.Context, server PID) (ServerState, error)
	ClientPIDs(ctx context.Context, server PID) ([]PID, error)
	Clients(ctx context.Context) ([]Client, error)
	ServerClients(ctx context.Context, server PID) ([]Client, error)
	SetDefaultActiveThreadPercentage(ctx context.Context, pct Percentage) error
	DefaultActiveThreadPercentage(ctx context.Context) (float64, error)
	SetActiveThreadPercentage(ctx context.Context, server PID, pct Percentage) error
	ActiveThreadPercentage(ctx context.Context, server PID) (float64, error)
	SetDefaultDevicePinnedMemLimit(ctx context.Context, dev Device, limit MemLimit) error
	DefaultDevicePinnedMemLimit(ctx context.Context, dev Device) (MemLimit, error)
	SetDevicePinnedMemLimit(ctx context.Context, server PID, dev Device, limit MemLimit) error
	DevicePinnedMemLimit(ctx context.Context, server PID, dev Device) (MemLimit, error)
	SetDefaultClientPriority(ctx context.Context, p Priority) error
	DefaultClientPriority(ctx context.Context) (Priority, error)
	TerminateClient(ctx context.Context, server, client PID) error
	ShutdownServer(ctx context.Context, server PID, force bool) error
	StartServer(ctx context.Context, uid UID) error
	Quit(ctx context.Context) error
}

var (
	_ daemon = (*Control)(nil)
	_ daemon = (*Sim)(nil)
)

// evictor is the kind of small interface admission declares for itself.
type evictor interface {
	Health() Health
	Clients(ctx context.Context) ([]Client, error)
	TerminateClient(ctx context.Context, server, client PID) error
}

var (
	_ evictor = (*Control)(nil)
	_ evictor = (*Sim)(nil)
)

// TestControlAndSimAgree runs one scenario against the fake daemon through
// Control and against Sim, and expects the same results.
func TestControlAndSimAgree(t *testing.T) {
	t.Parallel()
	backends := []struct {
		name      string
		make      func(t *testing.T) daemon
		addClient func(t *testing.T, d daemon, pid PID)
	}{
		{
			name: "control",
			make: func(t *testing.T) daemon {
				f := newFake(t)
				c := f.control(f.config())
				t.Cleanup(func() { _ = c.Quit(context.Background()) })
				return c
			},
			addClient: func(t *testing.T, d daemon, pid PID) {
				c := d.(*Control)
				f := &fake{t: t, bin: c.cfg.Binary, pipe: c.cfg.PipeDir, logs: c.cfg.LogDir}
				f.send("fake_client_connect " + pid.arg() + " 0")
			},
		},
		{
			name: "sim",
			make: func(t *testing.T) daemon {
				s, err := NewSim(SimConfig{Device: testUUID})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			addClient: func(t *testing.T, d daemon, pid PID) {
				if err := d.(*Sim).AddClient(pid, 100); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := testCtx(t)
			d := b.make(t)
			if err := d.Ensure(ctx); err != nil || !d.Health().Ready() {
				t.Fatalf("Ensure = %v, Health = %+v", err, d.Health())
			}
			b.addClient(t, d, 4242)
			b.addClient(t, d, 4343)
			servers, err := d.ServerPIDs(ctx)
			if err != nil || len(servers) != 1 {
				t.Fatalf("ServerPIDs = %v, %v", servers, err)
			}
			srv := servers[0]
			if st, err := d.ServerStatus(ctx, srv); err != nil || st != ServerActive {
				t.Fatalf("ServerStatus = %v, %v", st, err)
			}
			clients, err := d.Clients(ctx)
			if err != nil || len(clients) != 2 || clients[0].Server != srv || clients[0].PID != 4242 {
				t.Fatalf("Clients = %+v, %v", clients, err)
			}
			if err := d.SetActiveThreadPercentage(ctx, srv, 50); err != nil {
				t.Fatal(err)
			}
			if v, err := d.ActiveThreadPercentage(ctx, srv); err != nil || v != 50 {
				t.Fatalf("ActiveThreadPercentage = %v, %v", v, err)
			}
			if err := d.SetDefaultDevicePinnedMemLimit(ctx, DeviceIndex(0), 4*GiB); err != nil {
				t.Fatal(err)
			}
			if v, err := d.DefaultDevicePinnedMemLimit(ctx, DeviceIndex(0)); err != nil || v != 4*GiB {
				t.Fatalf("DefaultDevicePinnedMemLimit = %v, %v", v, err)
			}
			if p, err := d.DefaultClientPriority(ctx); err != nil || p != PriorityNormal {
				t.Fatalf("DefaultClientPriority = %v, %v", p, err)
			}
			if err := d.TerminateClient(ctx, srv, 4242); err != nil {
				t.Fatal(err)
			}
			if err := d.TerminateClient(ctx, srv, 4242); !errors.Is(err, ErrTerminateFailed) {
				t.Fatalf("second TerminateClient = %v, want ErrTerminateFailed", err)
			}
			if pids, err := d.ClientPIDs(ctx, srv); err != nil || len(pids) != 1 || pids[0] != 4343 {
				t.Fatalf("ClientPIDs = %v, %v", pids, err)
			}
			if err := d.SetDefaultActiveThreadPercentage(ctx, 101); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("SetDefaultActiveThreadPercentage(101) = %v", err)
			}
			if err := d.ShutdownServer(ctx, srv, false); err != nil {
				t.Fatal(err)
			}
			if pids, err := d.ServerPIDs(ctx); err != nil || len(pids) != 0 {
				t.Fatalf("ServerPIDs after shutdown = %v, %v", pids, err)
			}
			if err := d.Quit(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
