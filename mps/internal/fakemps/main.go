// Command fakemps stands in for nvidia-cuda-mps-control in colocd's tests.
// It speaks the same stdin protocol (one run per command, the command on
// stdin), keeps the daemon's state across runs in a JSON file in
// CUDA_MPS_PIPE_DIRECTORY, writes the PID file and control.log lines as the
// real daemon does, and can be told through files in the pipe directory to
// misbehave. See docs/mps.md for the list.
//
// It keeps MPS's one-user rule as the real daemon does: a server serves
// one user; a client of another user waits (pending) until every client of
// the running server has exited, then gets a server of its own user. Each
// server's user can be read as the real one's is, from a status file
// (fake-proc/<server pid>/status in the pipe directory, laid out as
// /proc/<pid>/status).
//
// It shares no code with package mps on purpose: a parser bug must not be
// mirrored by the fake.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Files in the pipe directory.
const (
	pidFile     = "nvidia-cuda-mps-control.pid" // as the real daemon
	stateFile   = "fake-state.json"             // the daemon's state
	lockFile    = "fake.lock"                   // serialises command runs
	commandsLog = "fake-commands.log"           // every command received, quoted, one per line
	startsLog   = "fake-starts.log"             // one line per daemon start: -d or -f
	hungPIDFile = "fake-hung.pid"               // PID of a run that hangs
	procDir     = "fake-proc"                   // <server pid>/status, as in /proc

	// Control files: a test creates them to make the fake misbehave.
	hangFile      = "fake-hang"       // command runs hang; content: verbs to hang on (empty: all)
	garbageFile   = "fake-garbage"    // command runs print this file's content instead of answering
	faultFile     = "fake-fault"      // get_server_status answers FAULT
	crashFile     = "fake-crash"      // the daemon exits with status 1 without cleaning up (file removed)
	failStartFile = "fake-fail-start" // a daemon start fails with status 1
)

// The documented default namespace shown by ps.
const namespace = 4026531836

type client struct {
	PID int    `json:"pid"`
	ID  int    `json:"id"`
	UID int    `json:"uid"`
	Cmd string `json:"cmd"`
}

type server struct {
	PID     int               `json:"pid"`
	UID     int               `json:"uid"`
	Pct     float64           `json:"pct"`
	Mem     map[string]string `json:"mem"`
	Clients []client          `json:"clients"`
	NextID  int               `json:"next_id"`
	// Draining: a client of another user waits; the server exits once its
	// last client has, and accepts no new client.
	Draining bool `json:"draining"`
}

type state struct {
	Daemon     int               `json:"daemon"`
	Visible    string            `json:"visible"` // CUDA_VISIBLE_DEVICES of the daemon
	DefaultPct float64           `json:"default_pct"`
	DefaultMem map[string]string `json:"default_mem"`
	Priority   int               `json:"priority"`
	Servers    []*server         `json:"servers"`
	NextServer int               `json:"next_server"`
	// Pending are clients (PID 0: a start_server request) waiting for a
	// server of their user, in arrival order.
	Pending []client `json:"pending"`
	Quit    bool     `json:"quit"`
}

type env struct {
	pipe, logs string
}

func main() {
	e := env{pipe: getenv("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), logs: getenv("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps")}
	args := os.Args[1:]
	switch {
	case len(args) == 0:
		os.Exit(e.command())
	case args[0] == "-d":
		os.Exit(e.background())
	case args[0] == "-f":
		os.Exit(e.foreground())
	}
	fmt.Fprintln(os.Stderr, "usage: nvidia-cuda-mps-control [-d | -f]")
	os.Exit(2)
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (e env) path(name string) string { return filepath.Join(e.pipe, name) }

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// running returns the live daemon's PID, or 0.
func (e env) running() int {
	data, err := os.ReadFile(e.path(pidFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return 0
		}
	}
	return pid
}

// logLine appends a line in the real daemon's format to a log file.
func (e env) logLine(file, who string, pid int, format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(e.logs, file), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "[%s %-7s %5d] %s\n", time.Now().Format("2006-01-02 15:04:05.000"), who, pid, fmt.Sprintf(format, args...))
}

func appendLine(p, line string) {
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}

// background starts the daemon detached (-d) and returns once its PID file
// is written, as the real one returns after forking.
func (e env) background() int {
	if e.running() != 0 {
		fmt.Fprintln(os.Stderr, "An instance of this daemon is already running")
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p := exec.Command(self, "-f")
	p.Env = append(os.Environ(), "FAKEMPS_MODE=-d")
	p.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := p.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	exited := make(chan struct{})
	go func() { _ = p.Wait(); close(exited) }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			fmt.Fprintln(os.Stderr, "daemon exited during startup")
			return 1
		case <-time.After(5 * time.Millisecond):
		}
		if e.running() == p.Process.Pid {
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "daemon did not start")
	return 1
}

// foreground runs the daemon (-f): writes the state and PID file, then
// waits for quit, a signal or a crash order.
func (e env) foreground() int {
	if e.running() != 0 {
		fmt.Fprintln(os.Stderr, "An instance of this daemon is already running")
		return 1
	}
	for _, d := range []string{e.pipe, e.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	mode := getenv("FAKEMPS_MODE", "-f")
	appendLine(e.path(startsLog), mode)
	pid := os.Getpid()
	if exists(e.path(failStartFile)) {
		e.logLine("control.log", "Control", pid, "Failed to start control daemon: %s present", failStartFile)
		return 1
	}
	next := firstServerPID(pid)
	_ = os.RemoveAll(e.path(procDir)) // servers die with their daemon
	st := &state{Daemon: pid, Visible: os.Getenv("CUDA_VISIBLE_DEVICES"), DefaultPct: 100, DefaultMem: map[string]string{}, NextServer: next}
	unlock, err := e.lock()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = e.save(st)
	if err == nil {
		err = os.WriteFile(e.path(pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o644)
	}
	unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e.logLine("control.log", "Control", pid, "Starting control daemon using socket %s/control", e.pipe)
	e.logLine("control.log", "Control", pid, "To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=%s", e.pipe)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case <-sigs:
			e.stop(pid)
			return 0
		case <-time.After(10 * time.Millisecond):
		}
		if exists(e.path(crashFile)) {
			_ = os.Remove(e.path(crashFile))
			return 1 // no cleanup: the PID file stays, as after a real crash
		}
		if st, err := e.load(); err != nil || st.Daemon != pid || st.Quit {
			e.stop(pid)
			return 0
		}
	}
}

func (e env) stop(pid int) {
	e.logLine("control.log", "Control", pid, "Exit")
	_ = os.RemoveAll(e.path(procDir))
	_ = os.Remove(e.path(pidFile))
}

func (e env) lock() (func(), error) {
	f, err := os.OpenFile(e.path(lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func (e env) load() (*state, error) {
	data, err := os.ReadFile(e.path(stateFile))
	if err != nil {
		return nil, err
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, err
	}
	return st, nil
}

func (e env) save(st *state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := e.path(stateFile + ".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, e.path(stateFile))
}

// command is one client run: the command(s) on stdin, the answer on stdout.
func (e env) command() int {
	in, _ := io.ReadAll(io.LimitReader(os.Stdin, 64<<10))
	appendLine(e.path(commandsLog), strconv.Quote(string(in)))
	if e.hangs(string(in)) {
		_ = os.WriteFile(e.path(hungPIDFile), []byte(strconv.Itoa(os.Getpid())), 0o644)
		for {
			time.Sleep(time.Hour)
		}
	}
	daemon := e.running()
	if daemon == 0 {
		fmt.Fprintln(os.Stderr, "Cannot find MPS control daemon process")
		return 1
	}
	if g, err := os.ReadFile(e.path(garbageFile)); err == nil {
		os.Stdout.Write(g)
		return 0
	}
	unlock, err := e.lock()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer unlock()
	st, err := e.load()
	if err != nil || st.Quit {
		fmt.Fprintln(os.Stderr, "Cannot find MPS control daemon process")
		return 1
	}
	for _, line := range strings.Split(string(in), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			e.logLine("control.log", "Control", daemon, "Accepting connection...")
			e.logLine("control.log", "Control", daemon, "Command: %s", line)
			os.Stdout.WriteString(e.do(st, strings.Fields(line)))
		}
	}
	if err := e.save(st); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// hangs reports whether this run must hang.
func (e env) hangs(in string) bool {
	data, err := os.ReadFile(e.path(hangFile))
	if err != nil {
		return false
	}
	verbs := strings.Fields(string(data))
	f := strings.Fields(in)
	return len(verbs) == 0 || len(f) > 0 && slices.Contains(verbs, f[0])
}

var memValue = regexp.MustCompile(`^[0-9]+[MG]$`)

// call is one command being answered: the daemon's state and the
// command's arguments.
type call struct {
	e    env
	st   *state
	args []string
}

// num is argument i as a whole number ≥ 0.
func (k *call) num(i int) (int, bool) {
	if i >= len(k.args) {
		return 0, false
	}
	n, err := strconv.Atoi(k.args[i])
	return n, err == nil && n >= 0
}

// srv is the server whose PID is argument i, or nil.
func (k *call) srv(i int) *server {
	n, ok := k.num(i)
	if !ok {
		return nil
	}
	for _, s := range k.st.Servers {
		if s.PID == n {
			return s
		}
	}
	return nil
}

// pct is argument i as a percentage in (0, 100].
func (k *call) pct(i int) (float64, bool) {
	if i >= len(k.args) {
		return 0, false
	}
	v, err := strconv.ParseFloat(k.args[i], 64)
	return v, err == nil && v > 0 && v <= 100
}

// priority is argument i as a client priority: 0 (normal) or 1 (below
// normal).
func (k *call) priority(i int) (int, bool) {
	p, ok := k.num(i)
	return p, ok && p <= 1
}

// setDefault answers a set_default_* command that takes one value: parse
// reads it, and set stores it. A value parse refuses, or a wrong number of
// arguments, gets the daemon's message invalid.
func setDefault[T any](parse func(*call, int) (T, bool), set func(*state, T), invalid string) func(*call) string {
	return func(k *call) string {
		v, ok := parse(k, 0)
		if !ok || len(k.args) != 1 {
			return invalid
		}
		set(k.st, v)
		return ""
	}
}

// notFound is the daemon's answer for a server PID (argument i) it does not know.
func (k *call) notFound(i int) string {
	if i >= len(k.args) {
		return "Missing server PID\n"
	}
	return fmt.Sprintf("Server %s not found\n", k.args[i])
}

// do runs one command against st and returns the answer.
func (e env) do(st *state, f []string) string {
	verb := f[0]
	if h, ok := verbs[verb]; ok {
		return h(&call{e: e, st: st, args: f[1:]})
	}
	return fmt.Sprintf("Unrecognized command %s\n", strconv.Quote(verb))
}

// verbs answers each control command, as the real daemon prints it.
var verbs = map[string]func(k *call) string{
	"get_server_list": func(k *call) string {
		var b strings.Builder
		for _, s := range k.st.Servers {
			fmt.Fprintf(&b, "%d\n", s.PID)
		}
		return b.String()
	},
	"get_server_status": func(k *call) string {
		s := k.srv(0)
		if s == nil || len(k.args) != 1 {
			return k.notFound(0)
		}
		if exists(k.e.path(faultFile)) {
			return "FAULT\n"
		}
		return "ACTIVE\n"
	},
	"get_client_list": func(k *call) string {
		s := k.srv(0)
		if s == nil || len(k.args) != 1 {
			return k.notFound(0)
		}
		var b strings.Builder
		for _, c := range s.Clients {
			fmt.Fprintf(&b, "%d\n", c.PID)
		}
		return b.String()
	},
	"ps": func(k *call) string {
		var only *server
		if len(k.args) > 0 {
			if only = k.srv(1); k.args[0] != "-p" || only == nil || len(k.args) != 2 {
				return "Invalid arguments for ps\n"
			}
		}
		var b strings.Builder
		b.WriteString("PID ID SERVER DEVICE NAMESPACE COMMAND\n")
		for _, s := range k.st.Servers {
			if only != nil && s != only {
				continue
			}
			for _, c := range s.Clients {
				fmt.Fprintf(&b, "%d %d %d %s %d %s\n", c.PID, c.ID, s.PID, partial(k.st.Visible), namespace, c.Cmd)
			}
		}
		return b.String()
	},
	"set_default_active_thread_percentage": setDefault((*call).pct, func(st *state, p float64) { st.DefaultPct = p }, "Invalid active thread percentage\n"),
	"get_default_active_thread_percentage": func(k *call) string {
		return fmt.Sprintf("%.1f\n", k.st.DefaultPct)
	},
	"set_active_thread_percentage": func(k *call) string {
		s := k.srv(0)
		p, ok := k.pct(1)
		if s == nil || !ok || len(k.args) != 2 {
			return "Invalid arguments for set_active_thread_percentage\n"
		}
		s.Pct = p
		return ""
	},
	"get_active_thread_percentage": func(k *call) string {
		s := k.srv(0)
		if s == nil || len(k.args) != 1 {
			return k.notFound(0)
		}
		return fmt.Sprintf("%.1f\n", s.Pct)
	},
	"set_default_device_pinned_mem_limit": func(k *call) string {
		if len(k.args) != 2 || !memValue.MatchString(k.args[1]) {
			return "Invalid arguments for set_default_device_pinned_mem_limit\n"
		}
		k.st.DefaultMem[k.args[0]] = k.args[1]
		return ""
	},
	"get_default_device_pinned_mem_limit": func(k *call) string {
		if len(k.args) != 1 {
			return "Invalid arguments\n"
		}
		return orZero(k.st.DefaultMem[k.args[0]]) + "\n"
	},
	"set_device_pinned_mem_limit": func(k *call) string {
		s := k.srv(0)
		if s == nil || len(k.args) != 3 || !memValue.MatchString(k.args[2]) {
			return "Invalid arguments for set_device_pinned_mem_limit\n"
		}
		s.Mem[k.args[1]] = k.args[2]
		return ""
	},
	"get_device_pinned_mem_limit": func(k *call) string {
		s := k.srv(0)
		if s == nil || len(k.args) != 2 {
			return k.notFound(0)
		}
		return orZero(s.Mem[k.args[1]]) + "\n"
	},
	"set_default_client_priority": setDefault((*call).priority, func(st *state, p int) { st.Priority = p }, "Invalid client priority\n"),
	"get_default_client_priority": func(k *call) string {
		return fmt.Sprintf("%d\n", k.st.Priority)
	},
	"terminate_client": func(k *call) string {
		s := k.srv(0)
		c, ok := k.num(1)
		if s == nil || !ok || len(k.args) != 2 {
			return "999\n"
		}
		i := slices.IndexFunc(s.Clients, func(x client) bool { return x.PID == c })
		if i < 0 {
			return "999\n"
		}
		s.Clients = slices.Delete(s.Clients, i, i+1)
		k.e.logLine("server.log", "Server", s.PID, "Client {PID: %d, Context ID: 0} terminated", c)
		k.e.settle(k.st)
		return "0\n"
	},
	"shutdown_server": func(k *call) string {
		s := k.srv(0)
		if s == nil || len(k.args) > 2 || len(k.args) == 2 && k.args[1] != "-f" {
			return k.notFound(0)
		}
		k.e.exited(k.st, s)
		k.e.settle(k.st)
		return ""
	},
	"start_server": func(k *call) string {
		uid, ok := k.num(1)
		if len(k.args) != 2 || k.args[0] != "-uid" || !ok {
			return "Invalid arguments for start_server\n"
		}
		k.e.connect(k.st, client{UID: uid})
		return ""
	},
	"quit": func(k *call) string {
		k.st.Quit = true
		return ""
	},
	"fake_client_connect": func(k *call) string { // fake only: a client process connects
		pid, ok1 := k.num(0)
		uid, ok2 := k.num(1)
		if !ok1 || !ok2 || pid == 0 {
			return "Invalid arguments for fake_client_connect\n"
		}
		cmd := strings.Join(k.args[2:], " ")
		if cmd == "" {
			cmd = "./client"
		}
		if s := k.e.connect(k.st, client{PID: pid, UID: uid, Cmd: cmd}); s != nil {
			// The real client blocks in CUDA init; the fake says why.
			return fmt.Sprintf("pending: server %d serves user %d\n", s.PID, s.UID)
		}
		return ""
	},
	"fake_client_exit": func(k *call) string { // fake only: a client process exits
		pid, ok := k.num(0)
		if !ok || pid == 0 || len(k.args) != 1 {
			return "Invalid arguments for fake_client_exit\n"
		}
		k.st.Pending = slices.DeleteFunc(k.st.Pending, func(c client) bool { return c.PID == pid })
		for _, s := range k.st.Servers {
			if i := slices.IndexFunc(s.Clients, func(c client) bool { return c.PID == pid }); i >= 0 {
				s.Clients = slices.Delete(s.Clients, i, i+1)
				k.e.logLine("server.log", "Server", s.PID, "Client {PID: %d} disconnected", pid)
			}
		}
		k.e.settle(k.st)
		return ""
	},
}

// connect is a client (PID 0: a start_server request) asking for a server
// of its user. It joins the running server of its user; with no server
// running it gets one; while a server of another user runs (or one drains)
// it waits in Pending, and every running server is asked to exit once its
// clients have: it returns the server it waits behind, nil when it joined.
func (e env) connect(st *state, c client) *server {
	for _, s := range st.Servers {
		if s.UID == c.UID && !s.Draining && len(st.Pending) == 0 {
			e.join(st, s, c)
			return nil
		}
	}
	if len(st.Servers) == 0 && len(st.Pending) == 0 {
		e.join(st, e.startServer(st, c.UID), c)
		return nil
	}
	if c.PID != 0 {
		e.logLine("control.log", "Control", st.Daemon, "NEW CLIENT %d from user %d: Server is not ready, push client to pending list", c.PID, c.UID)
	}
	st.Pending = append(st.Pending, c)
	for _, s := range st.Servers {
		s.Draining = true
	}
	e.settle(st)
	if i := slices.IndexFunc(st.Pending, func(p client) bool { return p == c }); i >= 0 && len(st.Servers) > 0 {
		return st.Servers[0]
	}
	return nil
}

// join adds c to s (a start_server request, PID 0, adds nothing).
func (e env) join(st *state, s *server, c client) {
	if c.PID == 0 {
		return
	}
	e.logLine("control.log", "Control", st.Daemon, "NEW CLIENT %d from user %d: Server already exists", c.PID, c.UID)
	c.ID = s.NextID
	s.Clients = append(s.Clients, c)
	s.NextID++
	e.logLine("server.log", "Server", s.PID, "Client {PID: %d, Context ID: %d} connected", c.PID, c.ID)
}

// settle ends draining servers that have no client left and, once no
// server runs, starts one for the first pending user and lets that user's
// pending clients join it; the next user's clients keep waiting behind it.
func (e env) settle(st *state) {
	for {
		for _, s := range slices.Clone(st.Servers) {
			if s.Draining && len(s.Clients) == 0 {
				e.exited(st, s)
			}
		}
		if len(st.Servers) > 0 || len(st.Pending) == 0 {
			return
		}
		s := e.startServer(st, st.Pending[0].UID)
		var rest []client
		for _, c := range st.Pending {
			if c.UID == s.UID {
				e.join(st, s, c)
			} else {
				rest = append(rest, c)
			}
		}
		st.Pending = rest
		s.Draining = len(rest) > 0
	}
}

// exited removes server s, as when the real one exits.
func (e env) exited(st *state, s *server) {
	st.Servers = slices.DeleteFunc(st.Servers, func(x *server) bool { return x == s })
	_ = os.RemoveAll(filepath.Join(e.path(procDir), strconv.Itoa(s.PID)))
	e.logLine("control.log", "Control", st.Daemon, "Server %d exited with status 0", s.PID)
}

// startServer starts a server for uid and writes its status file.
func (e env) startServer(st *state, uid int) *server {
	s := &server{PID: st.NextServer, UID: uid, Pct: st.DefaultPct, Mem: map[string]string{}}
	for k, v := range st.DefaultMem {
		s.Mem[k] = v
	}
	st.NextServer++
	st.Servers = append(st.Servers, s)
	dir := filepath.Join(e.path(procDir), strconv.Itoa(s.PID))
	if err := os.MkdirAll(dir, 0o755); err == nil {
		status := fmt.Sprintf("Name:\tnvidia-cuda-mps-server\nState:\tS (sleeping)\nUid:\t%d\t%d\t%d\t%d\n", uid, uid, uid, uid)
		_ = os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644)
	}
	e.logLine("control.log", "Control", st.Daemon, "Starting new server %d for user %d", s.PID, uid)
	e.logLine("control.log", "Control", st.Daemon, "NEW SERVER %d: Ready", s.PID)
	e.logLine("server.log", "Server", s.PID, "Server has started")
	return s
}

// partial is the partial UUID ps shows: GPU- and the first three groups.
func partial(visible string) string {
	if len(visible) >= 22 && strings.HasPrefix(visible, "GPU-") {
		return visible[:22]
	}
	return "GPU-00000000-0000-0000"
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// firstServerPID is the PID the fake gives its first server: above the
// host's pid_max, so that no real process ever has a server's PID (colocd
// reads a server's user from /proc/<pid>/status, where a real process of
// that PID would answer for it), yet within MPS's PID range; on a host
// whose pid_max leaves no room above it, past the daemon's own PID.
func firstServerPID(daemon int) int {
	const maxPID = 4_194_304 // PID_MAX_LIMIT
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 && n < maxPID-200_000 {
			return n + 1 + daemon%100_000
		}
	}
	if next := daemon + 1000; next <= 4_000_000 {
		return next
	}
	return 1000
}
