package mps

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOneUserRule walks the fake daemon through MPS's one-user rule (a
// server serves one user; a client of another user waits until every
// client of the running server has exited) and checks that Control reads
// the server's user as it goes, from the command and from a probe.
func TestOneUserRule(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.startedControl(func(cfg *Config) { cfg.ProcDir = filepath.Join(f.pipe, "fake-proc") })
	ensure(t, c)
	ctx := testCtx(t)
	clients := func() []int {
		cl, err := c.Clients(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var pids []int
		for _, x := range cl {
			pids = append(pids, int(x.PID))
		}
		return pids
	}
	steps := []struct {
		name    string
		send    string
		answer  string // the fake's answer to send
		user    int    // the server's user; -1: no server
		clients []int  // ps, in order
	}{
		{name: "no server yet", user: -1},
		{name: "the inference server, as root", send: "fake_client_connect 100 0 vllm", user: 0, clients: []int{100}},
		{name: "a trainer of another user waits", send: "fake_client_connect 200 1000 train.py", answer: "pending: server %d serves user 0\n", user: 0, clients: []int{100}},
		{name: "a draining server takes no client, of its user either", send: "fake_client_connect 101 0 vllm", answer: "pending: server %d serves user 0\n", user: 0, clients: []int{100}},
		{name: "its last client exits: the trainer's user gets a server", send: "fake_client_exit 100", user: 1000, clients: []int{200}},
		{name: "the trainer ends: the waiting root client gets one", send: "terminate_client %d 200", answer: "0\n", user: 0, clients: []int{101}},
		{name: "start_server of the same user adds nothing", send: "start_server -uid 0", user: 0, clients: []int{101}},
	}
	var server PID
	for _, s := range steps {
		if s.send != "" {
			line := strings.Replace(s.send, "%d", server.arg(), 1)
			want := strings.Replace(s.answer, "%d", server.arg(), 1)
			if got := f.send(line); got != want {
				t.Fatalf("%s: %q answered %q, want %q", s.name, line, got, want)
			}
		}
		uid, srv, ok, err := c.ServerUser(ctx)
		if err != nil {
			t.Fatalf("%s: ServerUser: %v", s.name, err)
		}
		if s.user < 0 {
			if ok {
				t.Fatalf("%s: ServerUser = uid %d of server %d, want no server", s.name, uid, srv)
			}
		} else if !ok || int(uid) != s.user {
			t.Fatalf("%s: ServerUser = %d, %v; want uid %d", s.name, uid, ok, s.user)
		}
		server = srv
		h := c.check(ctx)
		if hu, hs, hok := h.User(); hok != ok || hu != uid || hs != srv {
			t.Fatalf("%s: a probe's Health.User() = %d, %d, %v; ServerUser said %d, %d, %v", s.name, hu, hs, hok, uid, srv, ok)
		}
		if got := clients(); !slices.Equal(got, s.clients) {
			t.Fatalf("%s: clients %v, want %v", s.name, got, s.clients)
		}
	}
	log, err := os.ReadFile(filepath.Join(f.logs, "control.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "NEW CLIENT 200 from user 1000: Server is not ready, push client to pending list"); n != 1 {
		t.Errorf("control.log has %d pending lines for client 200, want 1", n)
	}
}

// TestServerUserUnreadable: a server whose status cannot be read (another
// PID namespace) has no known user, and is no error.
func TestServerUserUnreadable(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.startedControl(func(cfg *Config) { cfg.ProcDir = t.TempDir() })
	ensure(t, c)
	ctx := testCtx(t)
	f.send("fake_client_connect 100 0")
	if uid, srv, ok, err := c.ServerUser(ctx); err != nil || ok {
		t.Fatalf("ServerUser = %d, %d, %v, %v; want no known user and no error", uid, srv, ok, err)
	}
	h := c.check(ctx)
	if len(h.Servers) != 1 || h.Servers[0].UID != nil || !h.Ready() {
		t.Fatalf("Health = %+v; want one ready server with no uid", h)
	}
}

// TestSimServerUser: the simulated daemon's server serves its configured
// user.
func TestSimServerUser(t *testing.T) {
	t.Parallel()
	s, err := NewSim(SimConfig{UID: 1234})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := s.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := s.ServerUser(ctx); err != nil || ok {
		t.Fatalf("ServerUser before a client = %v, %v; want none", ok, err)
	}
	if err := s.AddClient(4242, 100); err != nil {
		t.Fatal(err)
	}
	if uid, _, ok, err := s.ServerUser(ctx); err != nil || !ok || uid != 1234 {
		t.Fatalf("ServerUser = %d, %v, %v; want 1234", uid, ok, err)
	}
}
