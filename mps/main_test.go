package mps

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// buildDir holds the fake control binary, built once per test run.
var buildDir string

// TestMain fails the package if any test leaves a goroutine behind (the
// health loop, the supervised daemon's reaper, command runs).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mps-fake-")
	if err != nil {
		panic(err)
	}
	buildDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

var fakeOnce struct {
	sync.Once
	bin string
	err error
	out []byte
}

// fakeBinary builds mps/internal/fakemps as nvidia-cuda-mps-control (the
// name the real daemon has, which the liveness check looks for).
func fakeBinary(t testing.TB) string {
	t.Helper()
	fakeOnce.Do(func() {
		bin := filepath.Join(buildDir, "nvidia-cuda-mps-control")
		// go test puts its own go command first in PATH for the tests.
		goBin, err := exec.LookPath("go")
		if err != nil {
			fakeOnce.err = err
			return
		}
		cmd := exec.Command(goBin, "build", "-o", bin, "./internal/fakemps")
		fakeOnce.out, fakeOnce.err = cmd.CombinedOutput()
		fakeOnce.bin = bin
	})
	if fakeOnce.err != nil {
		t.Fatalf("build fake control binary: %v\n%s", fakeOnce.err, fakeOnce.out)
	}
	return fakeOnce.bin
}

// fake is one fake daemon's world: its pipe and log directories.
type fake struct {
	t    testing.TB
	bin  string
	pipe string
	logs string
}

// newFake prepares directories for a fake daemon and, at cleanup, kills any
// daemon still running there.
func newFake(t testing.TB) *fake {
	t.Helper()
	dir := t.TempDir()
	f := &fake{t: t, bin: fakeBinary(t), pipe: filepath.Join(dir, "pipe"), logs: filepath.Join(dir, "log")}
	for _, d := range []string{f.pipe, f.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(f.kill)
	return f
}

// config returns a Config for this fake with generous timeouts: other
// builds share the machine, and only hang tests use short ones.
func (f *fake) config() Config {
	return Config{
		Binary:            f.bin,
		PipeDir:           f.pipe,
		LogDir:            f.logs,
		Manage:            true,
		CommandTimeout:    20 * time.Second,
		ProbeInterval:     20 * time.Millisecond,
		ProbeTimeout:      20 * time.Second,
		StartTimeout:      30 * time.Second,
		RestartBackoff:    10 * time.Millisecond,
		MaxRestartBackoff: 100 * time.Millisecond,
	}
}

func (f *fake) control(cfg Config) *Control {
	f.t.Helper()
	c, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// ensured returns a Control for cfg whose Ensure has succeeded.
func (f *fake) ensured(cfg Config) *Control {
	f.t.Helper()
	c := f.control(cfg)
	if err := c.Ensure(testCtx(f.t)); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// hangTimeout bounds a command or a probe in the tests of a daemon that
// hangs: short, as those tests wait for it to pass.
const hangTimeout = 300 * time.Millisecond

// startedControl starts a daemon directly and returns a Control of it,
// whose config edit (if not nil) changes first.
func (f *fake) startedControl(edit func(*Config)) *Control {
	f.t.Helper()
	f.start()
	cfg := f.config()
	if edit != nil {
		edit(&cfg)
	}
	return f.control(cfg)
}

// eachDaemonMode runs test in a subtest for a daemon that colocd starts in
// the background (-d), and in one for a daemon it supervises in the
// foreground (-f).
func eachDaemonMode(t *testing.T, test func(t *testing.T, supervise bool)) {
	for _, supervise := range []bool{false, true} {
		t.Run(map[bool]string{false: "background", true: "supervised"}[supervise], func(t *testing.T) { test(t, supervise) })
	}
}

// ensure runs c.Ensure and ends the test if it fails.
func ensure(t *testing.T, c *Control) {
	t.Helper()
	if err := c.Ensure(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// start starts a daemon directly, as an operator or another tool would.
func (f *fake) start() PID {
	f.t.Helper()
	if _, _, err := f.exec("", "-d"); err != nil {
		f.t.Fatalf("start fake daemon: %v", err)
	}
	return f.daemonPID()
}

// send runs one command through the fake binary directly (not through
// Control), e.g. fake_client_connect.
func (f *fake) send(line string) string {
	f.t.Helper()
	out, _, err := f.exec(line + "\n")
	if err != nil {
		f.t.Fatalf("send %q: %v", line, err)
	}
	return out
}

func (f *fake) exec(stdin string, args ...string) (string, string, error) {
	cmd := exec.Command(f.bin, args...)
	cmd.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+f.pipe, "CUDA_MPS_LOG_DIRECTORY="+f.logs)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// daemonPID reads the PID file (0 if none).
func (f *fake) daemonPID() PID {
	data, err := os.ReadFile(filepath.Join(f.pipe, PIDFile))
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return PID(p)
}

// alive reports whether pid is a live, non-zombie process.
func alive(pid PID) bool {
	ok, _ := processAlive(pid, "nvidia-cuda-mps-control")
	return pid > 0 && ok
}

// waitGone waits until pid has exited.
func (f *fake) waitGone(pid PID) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			f.t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill ends a daemon left running in this fake's pipe directory.
func (f *fake) kill() {
	if pid := f.daemonPID(); alive(pid) {
		_ = syscall.Kill(int(pid), syscall.SIGKILL)
		for deadline := time.Now().Add(10 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// touch creates a control file in the pipe directory.
func (f *fake) touch(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.pipe, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fake) remove(name string) {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.pipe, name)); err != nil {
		f.t.Fatal(err)
	}
}

// lines returns a file of the pipe directory line by line.
func (f *fake) lines(name string) []string {
	data, err := os.ReadFile(filepath.Join(f.pipe, name))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

// commands returns every command the fake received, unquoted and trimmed.
func (f *fake) commands() []string {
	var out []string
	for _, l := range f.lines("fake-commands.log") {
		s, err := strconv.Unquote(l)
		if err != nil {
			f.t.Fatalf("commands log: %q: %v", l, err)
		}
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// count returns how many received commands start with prefix.
func (f *fake) count(prefix string) int {
	n := 0
	for _, c := range f.commands() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// appendLog appends a line to a log file of the fake.
func (f *fake) appendLog(file, line string) {
	f.t.Helper()
	fh, err := os.OpenFile(filepath.Join(f.logs, file), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(line + "\n"); err != nil {
		f.t.Fatal(err)
	}
}

// testCtx returns a context that ends with the test, bounded so that a
// broken test fails instead of hanging.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// quitAndWait quits a daemon c started and waits for it to exit (and, in
// supervised mode, for its reaper goroutine to end).
func quitAndWait(t *testing.T, c *Control) {
	t.Helper()
	c.mu.Lock()
	pid, reaped := c.daemon, c.reaped
	c.mu.Unlock()
	if err := c.Quit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if reaped != nil {
		select {
		case <-reaped:
		case <-time.After(30 * time.Second):
			t.Fatalf("daemon %d not reaped", pid)
		}
	}
	(&fake{t: t}).waitGone(pid)
}
