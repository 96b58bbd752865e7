package mps

import (
	"context"
	"errors"
	"testing"
)

func newSim(t *testing.T, cfg SimConfig) *Sim {
	t.Helper()
	s, err := NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ensure(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSimPercentagesAndEviction(t *testing.T) {
	t.Parallel()
	s := newSim(t, SimConfig{Device: testUUID, Defaults: Defaults{ActiveThreadPct: 60}})
	ctx := testCtx(t)
	if v, _ := s.DefaultActiveThreadPercentage(ctx); v != 60 {
		t.Fatalf("default = %v, want 60 (Defaults applied)", v)
	}
	// A client gets the lower of its own and the server's percentage.
	if err := s.AddClient(100, 30); err != nil {
		t.Fatal(err)
	}
	if err := s.AddClient(101, 90); err != nil {
		t.Fatal(err)
	}
	clients, err := s.Clients(ctx)
	if err != nil || len(clients) != 2 {
		t.Fatalf("Clients = %+v, %v", clients, err)
	}
	if clients[0].ActiveThreadPct != 30 || clients[1].ActiveThreadPct != 60 || clients[0].Device != "GPU-5a2c0f3e-8b7d-4c1a" {
		t.Fatalf("Clients = %+v", clients)
	}
	// Existing clients keep their percentage; new ones get the server's new one.
	srv := clients[0].Server
	if err := s.SetActiveThreadPercentage(ctx, srv, 20); err != nil {
		t.Fatal(err)
	}
	if err := s.AddClient(102, 90); err != nil {
		t.Fatal(err)
	}
	clients, _ = s.ServerClients(ctx, srv)
	if clients[1].ActiveThreadPct != 60 || clients[2].ActiveThreadPct != 20 {
		t.Fatalf("Clients = %+v", clients)
	}
	if err := s.TerminateClient(ctx, srv, 101); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveClient(102); err != nil {
		t.Fatal(err)
	}
	if pids, _ := s.ClientPIDs(ctx, srv); len(pids) != 1 || pids[0] != 100 {
		t.Fatalf("ClientPIDs = %v", pids)
	}
	if err := s.RemoveClient(102); !errors.Is(err, ErrUnknownClient) {
		t.Fatalf("RemoveClient(gone) = %v", err)
	}
	if err := s.AddClient(100, 10); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("AddClient(duplicate) = %v", err)
	}
	if _, err := s.ServerStatus(ctx, 7); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("ServerStatus(unknown) = %v", err)
	}
}

func TestSimValidatesLikeControl(t *testing.T) {
	t.Parallel()
	s := newSim(t, SimConfig{})
	ctx := testCtx(t)
	calls := []struct {
		name string
		call func() error
	}{
		{name: "add client pid 0", call: func() error { return s.AddClient(0, 50) }},
		{name: "add client pct 0", call: func() error { return s.AddClient(5, 0) }},
		{name: "terminate bad pid", call: func() error { return s.TerminateClient(ctx, -1, 2) }},
		{name: "bad uuid", call: func() error {
			return s.SetDefaultDevicePinnedMemLimit(ctx, DeviceUUID(testUUID+"\nquit"), GiB)
		}},
		{name: "bad priority", call: func() error { return s.SetDefaultClientPriority(ctx, 2) }},
		{name: "bad uid", call: func() error { return s.StartServer(ctx, -1) }},
		{name: "remove pid 0", call: func() error { return s.RemoveClient(0) }},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	if _, err := NewSim(SimConfig{Device: "GPU-1"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewSim(bad device) = %v", err)
	}
}

func TestSimFaultAndQuit(t *testing.T) {
	t.Parallel()
	s := newSim(t, SimConfig{})
	ctx := testCtx(t)
	events, cancel := s.Subscribe()
	defer cancel()
	runLoop(t, s.Run)
	if err := s.AddClient(100, 50); err != nil {
		t.Fatal(err)
	}
	s.SetFault("client 100 hit an illegal address")
	if h := waitState(t, events, StateFault); h.Ready() || len(h.Servers) != 1 || h.Servers[0].State != ServerFault {
		t.Fatalf("Health = %+v", h)
	}
	if err := s.AddClient(101, 50); !errors.Is(err, ErrServerNotReady) {
		t.Fatalf("AddClient during fault = %v", err)
	}
	s.ClearFault()
	waitState(t, events, StateReady)
	if err := s.AddClient(101, 50); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Quit(ctx); err != nil {
		t.Fatal(err)
	}
	waitState(t, events, StateDown)
	if _, err := s.Clients(ctx); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Clients after quit = %v", err)
	}
	if err := s.AddClient(102, 50); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("AddClient after quit = %v", err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := s.Ensure(cctx); err == nil {
		t.Fatal("Ensure with a cancelled context succeeded")
	}
	// A new start forgets what the old daemon was told.
	if err := s.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if pids, _ := s.ServerPIDs(ctx); len(pids) != 0 {
		t.Fatalf("servers survived quit: %v", pids)
	}
}
