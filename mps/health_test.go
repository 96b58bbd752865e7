package mps

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// runLoop runs c.Run until the test ends and checks that it returns nil.
// It returns a function that stops the loop and waits for it; the test's
// cleanup calls it too.
func runLoop(t *testing.T, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// watch runs c's health loop until the test ends (or stop) and returns
// the health events it sends.
func watch(t *testing.T, c *Control) (events <-chan Health, stop func()) {
	t.Helper()
	events, cancel := c.Subscribe()
	t.Cleanup(cancel)
	return events, runLoop(t, c.Run)
}

// waitState reads events until one has state s, and returns it.
func waitState(t *testing.T, events <-chan Health, s State) Health {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case h, ok := <-events:
			if !ok {
				t.Fatalf("events closed while waiting for %s", s)
			}
			if h.State == s {
				return h
			}
		case <-timeout:
			t.Fatalf("no %s event within 30s", s)
		}
	}
}

// waitHealth polls health until ok holds (a change of reason within one
// state sends no event). ok must describe a condition that lasts, never a
// reason that one probe sets and the next replaces: a poller on a busy
// machine misses those.
func waitHealth(t *testing.T, health func() Health, ok func(Health) bool) Health {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h := health()
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("health still %+v after 30s", h)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitProbes waits until the loop has probed n more times (each probe
// stamps Health.Checked): how a test gives the loop the rounds in which it
// must not do something, whatever the machine's load.
func waitProbes(t *testing.T, health func() Health, n int) {
	t.Helper()
	last := health().Checked
	deadline := time.Now().Add(30 * time.Second)
	for seen := 0; seen < n; time.Sleep(time.Millisecond) {
		if h := health(); !h.Checked.Equal(last) {
			seen, last = seen+1, h.Checked
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d probe rounds in 30s, want %d", seen, n)
		}
	}
}

// testLogger collects log records, to check that Run logs changes.
type testLogger struct {
	mu   sync.Mutex
	msgs []string
}

func (l *testLogger) Enabled(context.Context, slog.Level) bool { return true }
func (l *testLogger) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *testLogger) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *testLogger) WithGroup(string) slog.Handler      { return l }
func (l *testLogger) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if m == msg {
			return true
		}
	}
	return false
}

func TestHealthFaultFromServerStatus(t *testing.T) {
	t.Parallel()
	c, f := running(t)
	if err := c.StartServer(testCtx(t), 0); err != nil {
		t.Fatal(err)
	}
	events, _ := watch(t, c)
	f.touch("fake-fault", "")
	h := waitState(t, events, StateFault)
	if !strings.Contains(h.Reason, "reports FAULT") || len(h.Servers) != 1 || h.Servers[0].State != ServerFault || h.Ready() {
		t.Fatalf("Health = %+v", h)
	}
	f.remove("fake-fault")
	if h := waitState(t, events, StateReady); h.Servers[0].State != ServerActive {
		t.Fatalf("Health = %+v", h)
	}
}

func TestHealthFaultFromLogs(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"server.log", "control.log"} {
		t.Run(file, func(t *testing.T) {
			f := newFake(t)
			f.start()
			// Lines written before colocd looked are history.
			f.appendLog(file, "[2026-02-06 09:34:10.000 Control   261] Server 95 exited with status 1")
			c := f.ensured(f.config())
			events, _ := watch(t, c)
			f.appendLog("control.log", "[2026-02-06 09:34:17.770 Control   261] set_default_active_thread_percentage 40")
			f.appendLog(file, "[2026-02-06 09:34:18.000 Server   337] Server encountered a fatal exception. Shutting down")
			h := waitState(t, events, StateFault)
			if !strings.Contains(h.Reason, file) || !strings.Contains(h.Reason, "fatal exception") {
				t.Fatalf("Health = %+v", h)
			}
			waitState(t, events, StateReady) // no new fault line, every server ACTIVE
		})
	}
}

func TestHealthUnresponsiveAndUnknown(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.startedControl(func(c *Config) { c.ProbeTimeout = hangTimeout })
	ensure(t, c)
	events, _ := watch(t, c)
	f.touch("fake-hang", "get_server_list")
	if h := waitState(t, events, StateUnresponsive); !strings.Contains(h.Reason, "timed out") {
		t.Fatalf("Health = %+v", h)
	}
	f.remove("fake-hang")
	waitState(t, events, StateReady)
	f.touch("fake-garbage", "garbage\n")
	if h := waitState(t, events, StateUnknown); !strings.Contains(h.Reason, `"garbage\n"`) {
		t.Fatalf("Health = %+v", h)
	}
	f.remove("fake-garbage")
	waitState(t, events, StateReady)
}

// TestHealthRestartsOwnedDaemon: a daemon colocd started dies; the loop
// reports it down, restarts it and applies the defaults again.
func TestHealthRestartsOwnedDaemon(t *testing.T) {
	t.Parallel()
	eachDaemonMode(t, func(t *testing.T, supervise bool) {
		f := newFake(t)
		logs := &testLogger{}
		cfg := withDefaults(f.config())
		cfg.Supervise = supervise
		cfg.Logger = slog.New(logs)
		c := f.ensured(cfg)
		first := f.daemonPID()
		events, stop := watch(t, c)
		f.touch("fake-crash", "")
		if h := waitState(t, events, StateDown); !strings.Contains(h.Reason, "starting it") {
			t.Fatalf("Health = %+v", h)
		}
		h := waitState(t, events, StateReady)
		if !strings.Contains(h.Reason, "restarted daemon") || !h.Started || !h.Owned || h.Daemon == first {
			t.Fatalf("Health = %+v", h)
		}
		if st := f.state(); st.DefaultPct != 40 || st.DefaultMem[string(testUUID)] != "8192M" || st.Priority != 1 {
			t.Fatalf("defaults not re-applied: %+v", st)
		}
		if n := f.count("set_default_active_thread_percentage 40"); n != 2 {
			t.Fatalf("defaults applied %d times, want 2", n)
		}
		if !logs.has("mps daemon restarted") {
			t.Fatalf("logged %q, want the restart", logs.msgs)
		}
		if supervise {
			// Stop the health loop first: it owns the daemon and would
			// restart it after the quit, racing the test's cleanup.
			stop()
			quitAndWait(t, c)
		}
	})
}

// TestHealthRestartBacksOff: while starts fail the daemon stays down, and
// it comes back once they succeed.
func TestHealthRestartBacksOff(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.ensured(withDefaults(f.config()))
	events, _ := watch(t, c)
	f.touch("fake-fail-start", "")
	f.touch("fake-crash", "")
	waitState(t, events, StateDown)
	waitHealth(t, c.Health, func(h Health) bool { return strings.Contains(h.Reason, "restart failed") })
	f.remove("fake-fail-start")
	if h := waitState(t, events, StateReady); !strings.Contains(h.Reason, "restarted daemon") {
		t.Fatalf("Health = %+v", h)
	}
}

// TestHealthKeepsRestartFailure: while the backoff holds the next restart
// back, the reason still says why the last one failed, and a daemon that
// runs again clears it. The hour-long backoff needs no clock: the probes
// run one by one, well inside it.
func TestHealthKeepsRestartFailure(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.touch("fake-fail-start", "")
	cfg := f.config()
	cfg.RestartBackoff, cfg.MaxRestartBackoff = time.Hour, time.Hour
	c := f.control(cfg)
	ctx := testCtx(t)
	if err := c.Ensure(ctx); err == nil {
		t.Fatal("Ensure succeeded with failing starts")
	}
	if h := c.check(ctx); h.State != StateDown || !strings.Contains(h.Reason, "; restart failed: start daemon:") {
		t.Fatalf("first probe: Health = %+v, want the failed restart", h)
	}
	h := c.check(ctx)
	if h.State != StateDown || !strings.Contains(h.Reason, "next restart in") || !strings.Contains(h.Reason, "; last restart failed: start daemon:") {
		t.Fatalf("probe in backoff: Health = %+v, want the wait and the last failure", h)
	}
	if got, want := len(f.lines("fake-starts.log")), 2; got != want {
		t.Fatalf("%d starts, want %d (Ensure, one restart; none in backoff)", got, want)
	}
	f.remove("fake-fail-start")
	c.mu.Lock()
	c.nextRestart = time.Time{} // the hour has passed
	c.mu.Unlock()
	if h := c.check(ctx); h.State != StateReady || !strings.Contains(h.Reason, "restarted daemon") {
		t.Fatalf("Health = %+v, want the restarted daemon", h)
	}
	f.touch("fake-crash", "")
	f.waitGone(f.daemonPID())
	if h := c.check(ctx); h.State != StateReady {
		t.Fatalf("Health = %+v, want the restarted daemon", h)
	}
	// What the probe reported before it restarted the daemon.
	if h := c.Health(); !strings.Contains(h.Reason, "starting it") || strings.Contains(h.Reason, "failed") {
		t.Fatalf("Health = %+v, want no old failure after a daemon ran", h)
	}
}

func TestHealthDoesNotRestartForeignDaemon(t *testing.T) {
	t.Parallel()
	c, f := running(t)
	events, _ := watch(t, c)
	f.touch("fake-crash", "")
	h := waitState(t, events, StateDown)
	if !strings.Contains(h.Reason, "not started by colocd") {
		t.Fatalf("Health = %+v", h)
	}
	waitProbes(t, c.Health, 3)
	if n := len(f.lines("fake-starts.log")); n != 1 {
		t.Fatalf("%d starts, want 1: colocd restarted a daemon it did not start", n)
	}
	// Whoever manages the daemon starts it again; colocd reattaches.
	f.start()
	waitState(t, events, StateReady)
}

func TestHealthNoRestartAfterClose(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	c := f.ensured(f.config())
	ctx := testCtx(t)
	events, _ := watch(t, c)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f.touch("fake-crash", "")
	if h := waitState(t, events, StateDown); strings.Contains(h.Reason, "restart") {
		t.Fatalf("Health = %+v", h)
	}
	waitProbes(t, c.Health, 3)
	if n := len(f.lines("fake-starts.log")); n != 1 {
		t.Fatalf("%d starts after Close, want 1", n)
	}
}

func TestHealthTrackerDropsOldest(t *testing.T) {
	t.Parallel()
	var tr healthTracker
	events, cancel := tr.subscribe()
	states := []State{StateReady, StateFault}
	for i := 0; i < 3*eventBuffer+1; i++ {
		tr.set(Health{State: states[i%2]})
	}
	var got []State
	for len(events) > 0 {
		got = append(got, (<-events).State)
	}
	if len(got) != eventBuffer || got[len(got)-1] != StateReady {
		t.Fatalf("got %v, want the %d newest ending with ready", got, eventBuffer)
	}
	tr.set(Health{State: StateReady, Reason: "same state"})
	if len(events) != 0 {
		t.Fatal("an event for an unchanged state")
	}
	cancel()
	cancel() // idempotent
	if _, ok := <-events; ok {
		t.Fatal("channel open after cancel")
	}
	if tr.get().Reason != "same state" {
		t.Fatalf("get() = %+v", tr.get())
	}
}

func TestStateText(t *testing.T) {
	t.Parallel()
	for s, want := range map[State]string{StateUnknown: "unknown", StateReady: "ready", StateFault: "fault", StateUnresponsive: "unresponsive", StateDown: "down", State(9): "state(9)"} {
		if b, _ := s.MarshalText(); string(b) != want {
			t.Fatalf("%d: %q, want %q", int(s), b, want)
		}
	}
}

// TestRunStartsDaemonAfterFailedEnsure: with Manage, a daemon that could
// not be started by Ensure (say, at boot) is started by the health loop.
func TestRunStartsDaemonAfterFailedEnsure(t *testing.T) {
	t.Parallel()
	eachDaemonMode(t, testRunStartsDaemonAfterFailedEnsure)
}

func testRunStartsDaemonAfterFailedEnsure(t *testing.T, supervise bool) {
	f := newFake(t)
	f.touch("fake-fail-start", "")
	cfg := withDefaults(f.config())
	cfg.Supervise = supervise
	c := f.control(cfg)
	if err := c.Ensure(testCtx(t)); err == nil {
		t.Fatal("Ensure succeeded with failing starts")
	}
	stop := runLoop(t, c.Run)
	waitHealth(t, c.Health, func(h Health) bool { return strings.Contains(h.Reason, "restart failed") })
	f.remove("fake-fail-start")
	h := waitHealth(t, c.Health, func(h Health) bool { return h.Ready() })
	if !h.Started || f.state().DefaultPct != 40 {
		t.Fatalf("Health = %+v, state %+v", h, f.state())
	}
	if supervise {
		stop() // else the loop restarts the daemon it owns after the quit
		quitAndWait(t, c)
	}
}
