package mps

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeState reads the fake daemon's state file.
func (f *fake) state() (st struct {
	Daemon     int               `json:"daemon"`
	Visible    string            `json:"visible"`
	DefaultPct float64           `json:"default_pct"`
	DefaultMem map[string]string `json:"default_mem"`
	Priority   int               `json:"priority"`
}) {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.pipe, "fake-state.json"))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		f.t.Fatal(err)
	}
	return st
}

func withDefaults(cfg Config) Config {
	below := PriorityBelowNormal
	cfg.Device = testUUID
	cfg.Defaults = Defaults{ActiveThreadPct: 40, PinnedMemLimit: 8 * GiB, ClientPriority: &below}
	return cfg
}

func TestEnsureStartsDaemonAndAppliesDefaults(t *testing.T) {
	t.Parallel()
	eachDaemonMode(t, func(t *testing.T, supervise bool) {
		f := newFake(t)
		cfg := withDefaults(f.config())
		cfg.Supervise = supervise
		c := f.ensured(cfg)
		ctx := testCtx(t)
		h := c.Health()
		if h.State != StateReady || !h.Started || !h.Owned || h.Daemon != f.daemonPID() || !strings.HasPrefix(h.Reason, "started daemon") {
			t.Fatalf("Health = %+v", h)
		}
		want := map[bool]string{false: "-d", true: "-f"}[supervise]
		if got := f.lines("fake-starts.log"); len(got) != 1 || got[0] != want {
			t.Fatalf("starts = %q, want [%s]", got, want)
		}
		st := f.state()
		if st.Visible != string(testUUID) {
			t.Fatalf("daemon CUDA_VISIBLE_DEVICES = %q, want %s", st.Visible, testUUID)
		}
		if st.DefaultPct != 40 || st.DefaultMem[string(testUUID)] != "8192M" || st.Priority != 1 {
			t.Fatalf("defaults not applied: %+v", st)
		}
		// Close without QuitOnClose leaves the daemon to the inference server.
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if f.count("quit") != 0 || !alive(f.daemonPID()) {
			t.Fatal("Close quit the daemon without QuitOnClose")
		}
		if supervise {
			quitAndWait(t, c) // ends the child, so that its reaper ends too
		}
	})
}

func TestEnsureAttachesToForeignDaemon(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	pid := f.start()
	cfg := f.config()
	cfg.QuitOnClose = true
	c := f.ensured(cfg)
	ctx := testCtx(t)
	h := c.Health()
	if h.Started || h.Owned || h.Daemon != pid || !strings.HasPrefix(h.Reason, "attached to daemon") {
		t.Fatalf("Health = %+v", h)
	}
	if err := c.Quit(ctx); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Quit = %v, want ErrNotStarted", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if f.count("quit") != 0 || !alive(pid) {
		t.Fatal("colocd quit a daemon it did not start")
	}
	if n := len(f.lines("fake-starts.log")); n != 1 {
		t.Fatalf("%d starts, want 1 (attach must not start)", n)
	}
}

// TestRestartedColocdReattaches: a second colocd (as after a sidecar
// restart) attaches to the daemon the first one started: it owns it (and
// would restart it) but did not start it, so Close never quits it.
func TestRestartedColocdReattaches(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cfg := withDefaults(f.config())
	cfg.QuitOnClose = true
	first := f.ensured(cfg)
	ctx := testCtx(t)
	second := f.ensured(cfg)
	h := second.Health()
	if h.Started || !h.Owned {
		t.Fatalf("Health = %+v, want owned but not started", h)
	}
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if f.count("quit") != 0 || len(f.lines("fake-starts.log")) != 1 {
		t.Fatal("the restarted colocd quit or restarted the daemon")
	}
	// The first one started it and may quit it.
	pid := f.daemonPID()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitGone(pid)
	if _, err := os.Stat(filepath.Join(f.pipe, ownerFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("owner marker left behind: %v", err)
	}
}

// TestEnsureStartsNoSecondDaemon: an Ensure that cannot attach fails
// without starting a daemon: unmanaged with none running, or with one
// running that hangs (another on the same pipe directory would fight it).
func TestEnsureStartsNoSecondDaemon(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		control func(f *fake) *Control
		wantErr error
		starts  int // daemons started, the test's own included
	}{
		{"unmanaged, none running", func(f *fake) *Control {
			cfg := f.config()
			cfg.Manage = false
			return f.control(cfg)
		}, ErrNotRunning, 0},
		{"one running that hangs", func(f *fake) *Control {
			c := f.startedControl(func(c *Config) { c.ProbeTimeout = hangTimeout })
			f.touch("fake-hang", "")
			return c
		}, ErrTimeout, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			c := tt.control(f)
			if err := c.Ensure(testCtx(t)); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Ensure = %v, want %v", err, tt.wantErr)
			}
			if n := len(f.lines("fake-starts.log")); n != tt.starts {
				t.Fatalf("%d starts, want %d", n, tt.starts)
			}
		})
	}
}

func TestEnsureStartFailure(t *testing.T) {
	t.Parallel()
	eachDaemonMode(t, func(t *testing.T, supervise bool) {
		f := newFake(t)
		f.touch("fake-fail-start", "")
		cfg := f.config()
		cfg.Supervise = supervise
		c := f.control(cfg)
		err := c.Ensure(testCtx(t))
		if err == nil || !strings.HasPrefix(err.Error(), "start daemon") {
			t.Fatalf("Ensure = %v, want a start error", err)
		}
		if h := c.Health(); h.Started || h.State == StateReady {
			t.Fatalf("Health = %+v after a failed start", h)
		}
	})
}

// TestEnsureReplacesStalePIDFile: a PID file left by a crashed daemon names
// a dead process; Ensure starts a new daemon.
func TestEnsureReplacesStalePIDFile(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	f.touch(PIDFile, strconv.Itoa(dead.Process.Pid)+"\n")
	c := f.ensured(f.config())
	if h := c.Health(); !h.Started || h.Daemon == PID(dead.Process.Pid) {
		t.Fatalf("Health = %+v", h)
	}
}

func TestProcessAliveChecksProgram(t *testing.T) {
	t.Parallel()
	if ok, why := processAlive(PID(os.Getpid()), "nvidia-cuda-mps-control"); ok || !strings.Contains(why, "another program") {
		t.Fatalf("processAlive(test process) = %v, %q; want another program", ok, why)
	}
	if ok, _ := processAlive(PID(os.Getpid()), os.Args[0]); !ok {
		t.Fatal("processAlive(test process, its own name) = false")
	}
}

func TestCloseQuitsSupervisedChild(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cfg := f.config()
	cfg.Supervise, cfg.QuitOnClose = true, true
	c := f.ensured(cfg)
	ctx := testCtx(t)
	pid := f.daemonPID()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.reaped:
	default:
		t.Fatal("Close returned before the supervised daemon exited")
	}
	if f.count("quit") != 1 || alive(pid) {
		t.Fatal("daemon not quit")
	}
	// Close is idempotent and quits nothing twice.
	if err := c.Close(ctx); err != nil || f.count("quit") != 1 {
		t.Fatalf("second Close = %v, quits %d", err, f.count("quit"))
	}
}
