package mps

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const testUUID = UUID("GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab")

// running returns a Control attached to a fake daemon started outside it,
// and the fake.
func running(t *testing.T) (*Control, *fake) {
	t.Helper()
	f := newFake(t)
	c := f.startedControl(nil)
	ensure(t, c)
	return c, f
}

// TestCommandsRoundTrip drives every typed command against the fake and
// checks what the fake received and answered.
func TestCommandsRoundTrip(t *testing.T) {
	t.Parallel()
	c, f := running(t)
	ctx := testCtx(t)
	if err := c.StartServer(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	servers, err := c.ServerPIDs(ctx)
	if err != nil || len(servers) != 1 {
		t.Fatalf("ServerPIDs = %v, %v; want one server", servers, err)
	}
	srv := servers[0]
	f.send("fake_client_connect 4242 1000 python train.py --epochs 3")
	f.send("fake_client_connect 4343 1000")

	steps := []struct {
		name string
		do   func() (any, error)
		want any
		sent string
	}{
		{name: "server status", do: func() (any, error) { return c.ServerStatus(ctx, srv) }, want: ServerActive, sent: "get_server_status " + srv.arg()},
		{name: "client list", do: func() (any, error) { p, err := c.ClientPIDs(ctx, srv); return len(p), err }, want: 2, sent: "get_client_list " + srv.arg()},
		{name: "set default pct", do: func() (any, error) { return nil, c.SetDefaultActiveThreadPercentage(ctx, 40) }, sent: "set_default_active_thread_percentage 40"},
		{name: "get default pct", do: func() (any, error) { return c.DefaultActiveThreadPercentage(ctx) }, want: 40.0, sent: "get_default_active_thread_percentage"},
		{name: "set pct", do: func() (any, error) { return nil, c.SetActiveThreadPercentage(ctx, srv, 25) }, sent: "set_active_thread_percentage " + srv.arg() + " 25"},
		{name: "get pct", do: func() (any, error) { return c.ActiveThreadPercentage(ctx, srv) }, want: 25.0, sent: "get_active_thread_percentage " + srv.arg()},
		{name: "set default mem", do: func() (any, error) { return nil, c.SetDefaultDevicePinnedMemLimit(ctx, DeviceIndex(0), 10*GiB) }, sent: "set_default_device_pinned_mem_limit 0 10240M"},
		{name: "get default mem", do: func() (any, error) { return c.DefaultDevicePinnedMemLimit(ctx, DeviceIndex(0)) }, want: 10 * GiB, sent: "get_default_device_pinned_mem_limit 0"},
		{name: "get default mem unset", do: func() (any, error) { return c.DefaultDevicePinnedMemLimit(ctx, DeviceUUID(testUUID)) }, want: MemLimit(0), sent: "get_default_device_pinned_mem_limit " + string(testUUID)},
		{name: "set mem", do: func() (any, error) { return nil, c.SetDevicePinnedMemLimit(ctx, srv, DeviceUUID(testUUID), 900*MiB) }, sent: "set_device_pinned_mem_limit " + srv.arg() + " " + string(testUUID) + " 900M"},
		{name: "get mem", do: func() (any, error) { return c.DevicePinnedMemLimit(ctx, srv, DeviceUUID(testUUID)) }, want: 900 * MiB, sent: "get_device_pinned_mem_limit " + srv.arg() + " " + string(testUUID)},
		{name: "set priority", do: func() (any, error) { return nil, c.SetDefaultClientPriority(ctx, PriorityBelowNormal) }, sent: "set_default_client_priority 1"},
		{name: "get priority", do: func() (any, error) { return c.DefaultClientPriority(ctx) }, want: PriorityBelowNormal, sent: "get_default_client_priority"},
		{name: "server clients", do: func() (any, error) { cl, err := c.ServerClients(ctx, srv); return len(cl), err }, want: 2, sent: "ps -p " + srv.arg()},
		{name: "terminate", do: func() (any, error) { return nil, c.TerminateClient(ctx, srv, 4242) }, sent: "terminate_client " + srv.arg() + " 4242"},
		{name: "clients after terminate", do: func() (any, error) { cl, err := c.Clients(ctx); return len(cl), err }, want: 1, sent: "ps"},
		{name: "shutdown", do: func() (any, error) { return nil, c.ShutdownServer(ctx, srv, true) }, sent: "shutdown_server " + srv.arg() + " -f"},
		{name: "no servers", do: func() (any, error) { p, err := c.ServerPIDs(ctx); return len(p), err }, want: 0, sent: "get_server_list"},
	}
	for _, s := range steps {
		got, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.want != nil && got != s.want {
			t.Fatalf("%s: got %v, want %v", s.name, got, s.want)
		}
		cmds := f.commands()
		if last := cmds[len(cmds)-1]; last != s.sent {
			t.Fatalf("%s: fake received %q, want %q", s.name, last, s.sent)
		}
	}
}

func TestClientsListsPIDsForEviction(t *testing.T) {
	t.Parallel()
	c, f := running(t)
	ctx := testCtx(t)
	f.send("fake_client_connect 4242 0 python train.py")
	clients, err := c.Clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(clients) != 1 || clients[0].PID != 4242 || clients[0].Command != "python train.py" || clients[0].Device != "GPU-00000000-0000-0000" {
		t.Fatalf("Clients = %+v", clients)
	}
	if err := c.TerminateClient(ctx, clients[0].Server, clients[0].PID); err != nil {
		t.Fatal(err)
	}
	err = c.TerminateClient(ctx, clients[0].Server, clients[0].PID)
	if !errors.Is(err, ErrTerminateFailed) || !strings.Contains(err.Error(), "999") {
		t.Fatalf("second terminate = %v, want ErrTerminateFailed with the CUDA code", err)
	}
}

// TestRejectedBeforeAnyCommandRuns: a value that holds a newline or "quit",
// or is out of range, never reaches the pipe; the fake records every command
// it receives and must have received none.
func TestRejectedBeforeAnyCommandRuns(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.startedControl(nil)
	ctx := testCtx(t)
	evil := UUID(string(testUUID) + "\nquit")
	calls := []struct {
		name string
		call func() error
	}{
		{name: "uuid with newline quit", call: func() error { return c.SetDefaultDevicePinnedMemLimit(ctx, DeviceUUID(evil), GiB) }},
		{name: "uuid quit", call: func() error { _, err := c.DefaultDevicePinnedMemLimit(ctx, DeviceUUID("quit")); return err }},
		{name: "negative pid", call: func() error { return c.TerminateClient(ctx, -1, 5) }},
		{name: "zero client", call: func() error { return c.TerminateClient(ctx, 5, 0) }},
		{name: "pid beyond max", call: func() error { _, err := c.ServerStatus(ctx, MaxPID+1); return err }},
		{name: "percentage 0", call: func() error { return c.SetDefaultActiveThreadPercentage(ctx, 0) }},
		{name: "percentage 101", call: func() error { return c.SetActiveThreadPercentage(ctx, 5, 101) }},
		{name: "memory not MiB", call: func() error { return c.SetDevicePinnedMemLimit(ctx, 5, DeviceIndex(0), 1000) }},
		{name: "device -1", call: func() error { _, err := c.DevicePinnedMemLimit(ctx, 5, DeviceIndex(-1)); return err }},
		{name: "priority 7", call: func() error { return c.SetDefaultClientPriority(ctx, 7) }},
		{name: "uid -1", call: func() error { return c.StartServer(ctx, -1) }},
		{name: "ps -p 0", call: func() error { _, err := c.ServerClients(ctx, 0); return err }},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	// Request text parsed with the exported parsers fails the same way.
	for _, s := range []string{"4242\nquit", "quit", "4242 quit"} {
		if _, err := ParsePID(s); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("ParsePID(%q) = %v", s, err)
		}
	}
	if got := f.commands(); len(got) != 0 {
		t.Fatalf("the fake received %q, want nothing", got)
	}
	if alive := f.daemonPID(); !alivePID(alive) {
		t.Fatalf("daemon %d is gone", alive)
	}
}

func alivePID(p PID) bool { return alive(p) }

// TestHungDaemonTimesOut: a command that hangs is killed, with its process
// group, at its timeout.
func TestHungDaemonTimesOut(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.startedControl(func(c *Config) { c.CommandTimeout = hangTimeout })
	f.touch("fake-hang", "")
	start := time.Now()
	_, err := c.ServerPIDs(testCtx(t))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("took %v to time out", d)
	}
	data, err := os.ReadFile(filepath.Join(f.pipe, "fake-hung.pid"))
	if err != nil {
		t.Fatal(err)
	}
	hung, _ := strconv.Atoi(string(data))
	f.waitGone(PID(hung))
}

func TestCancelledContextStopsCommand(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.startedControl(nil)
	f.touch("fake-hang", "ps")
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := c.Clients(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestGarbageAnswerIsQuoted(t *testing.T) {
	t.Parallel()
	c, f := running(t)
	const garbage = "Segmentation fault\x00 \xff (core dumped)\n"
	f.touch("fake-garbage", garbage)
	ctx := testCtx(t)
	calls := []struct {
		name string
		call func() error
	}{
		{name: "server list", call: func() error { _, err := c.ServerPIDs(ctx); return err }},
		{name: "ps", call: func() error { _, err := c.Clients(ctx); return err }},
		{name: "status", call: func() error { _, err := c.ServerStatus(ctx, 5); return err }},
		{name: "set", call: func() error { return c.SetDefaultActiveThreadPercentage(ctx, 50) }},
		{name: "get pct", call: func() error { _, err := c.DefaultActiveThreadPercentage(ctx); return err }},
		{name: "terminate", call: func() error { return c.TerminateClient(ctx, 5, 6) }},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			wantOutputError(t, tt.call(), garbage)
		})
	}
}

func TestDaemonErrorTextIsAnError(t *testing.T) {
	t.Parallel()
	c, _ := running(t)
	// The fake, like the real daemon, prints an error for an unknown server.
	_, err := c.ServerStatus(testCtx(t), 77)
	wantOutputError(t, err, "Server 77 not found\n")
}

func TestCommandWithoutDaemonFails(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.control(f.config())
	_, err := c.ServerPIDs(testCtx(t))
	if !errors.Is(err, ErrCommandFailed) || !strings.Contains(err.Error(), "Cannot find MPS control daemon") {
		t.Fatalf("err = %v, want ErrCommandFailed quoting the binary's message", err)
	}
}

func TestNewChecksBinary(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Binary = filepath.Join(t.TempDir(), "missing")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "control") {
		t.Fatalf("New = %v, want an error about the control binary", err)
	}
}

func TestEnvironIsExplicit(t *testing.T) {
	t.Parallel()
	got := environ([]string{"PATH=/bin", "CUDA_MPS_PIPE_DIRECTORY=/elsewhere", "CUDA_VISIBLE_DEVICES=3", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=5"}, "CUDA_MPS_PIPE_DIRECTORY=/p")
	want := []string{"PATH=/bin", "CUDA_MPS_PIPE_DIRECTORY=/p"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("environ = %q, want %q", got, want)
	}
}
