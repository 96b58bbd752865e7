package mps

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/colocd/colocd/internal/proc"
)

// Control drives the MPS control daemon of one GPU through the control
// binary: one run of the binary per command, the command on stdin, the pipe
// and log directories set explicitly, a timeout per command. Its methods are
// safe for concurrent use.
type Control struct {
	cfg       Config
	log       *slog.Logger
	clientEnv []string // for command runs
	daemonEnv []string // for starting the daemon
	health    healthTracker

	startMu sync.Mutex // one start at a time (Ensure, restart)

	mu          sync.Mutex
	daemon      PID           // the daemon last attached to or started
	started     bool          // this process started daemon
	owned       bool          // colocd (this process or an earlier one) started daemon
	reaped      chan struct{} // supervised mode: closed when the child exits
	closing     bool          // Close was called: no more restarts
	tails       []*logTail    // control.log, server.log
	backoff     time.Duration // next restart delay
	nextRestart time.Time     // no restart attempt before this
	restartErr  error         // why the last restart failed; nil once a daemon runs
}

// New checks cfg (after filling its zero fields with DefaultConfig's) and
// returns a Control. It runs nothing.
func New(cfg Config) (*Control, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(cfg.Binary); err != nil {
		return nil, fmt.Errorf("mps config: control: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dirs := []string{"CUDA_MPS_PIPE_DIRECTORY=" + cfg.PipeDir, "CUDA_MPS_LOG_DIRECTORY=" + cfg.LogDir}
	c := &Control{
		cfg:       cfg,
		log:       log,
		clientEnv: environ(os.Environ(), dirs...),
		daemonEnv: environ(os.Environ(), dirs...),
		backoff:   cfg.RestartBackoff,
	}
	if cfg.Device != "" {
		c.daemonEnv = append(c.daemonEnv, "CUDA_VISIBLE_DEVICES="+string(cfg.Device))
	}
	c.tails = []*logTail{{path: cfg.LogDir + "/control.log"}, {path: cfg.LogDir + "/server.log"}}
	return c, nil
}

// Config returns the configuration in use (defaults filled).
func (c *Control) Config() Config { return c.cfg }

// do validates params, builds the command and runs it with timeout.
func (c *Control) do(ctx context.Context, timeout time.Duration, verb string, params ...param) (string, error) {
	cmd, err := newCommand(verb, params...)
	if err != nil {
		return "", err
	}
	return c.runCommand(ctx, timeout, cmd)
}

// doEmpty runs a command that prints nothing on success; its error says
// what was asked.
func (c *Control) doEmpty(ctx context.Context, what, verb string, params ...param) error {
	out, err := c.do(ctx, c.cfg.CommandTimeout, verb, params...)
	if err == nil {
		err = parseEmpty(verb, out)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// query runs a command that prints a value, within timeout, and reads the
// value with parse; its error says what was asked.
func query[T any](ctx context.Context, c *Control, timeout time.Duration, what string, parse func(verb, out string) (T, error), verb string, params ...param) (T, error) {
	out, err := c.do(ctx, timeout, verb, params...)
	if err == nil {
		var v T
		if v, err = parse(verb, out); err == nil {
			return v, nil
		}
	}
	var zero T
	return zero, fmt.Errorf("%s: %w", what, err)
}

// anyVerb adapts a parser of one command's answer to query.
func anyVerb[T any](parse func(out string) (T, error)) func(verb, out string) (T, error) {
	return func(_, out string) (T, error) { return parse(out) }
}

// ServerPIDs lists the PIDs of the running MPS servers (get_server_list).
func (c *Control) ServerPIDs(ctx context.Context) ([]PID, error) {
	return c.serverPIDs(ctx, c.cfg.CommandTimeout)
}

func (c *Control) serverPIDs(ctx context.Context, timeout time.Duration) ([]PID, error) {
	return query(ctx, c, timeout, "list servers", anyVerb(parseServerList), verbGetServerList)
}

// ServerStatus returns a server's state (get_server_status).
func (c *Control) ServerStatus(ctx context.Context, server PID) (ServerState, error) {
	return c.serverStatus(ctx, c.cfg.CommandTimeout, server)
}

func (c *Control) serverStatus(ctx context.Context, timeout time.Duration, server PID) (ServerState, error) {
	return query(ctx, c, timeout, "get server status", anyVerb(parseServerStatus), verbGetServerStatus, server)
}

// ClientPIDs lists the PIDs of a server's clients (get_client_list).
func (c *Control) ClientPIDs(ctx context.Context, server PID) ([]PID, error) {
	return query(ctx, c, c.cfg.CommandTimeout, "list clients", anyVerb(parseClientList), verbGetClientList, server)
}

// Clients lists every client of every server with its server PID, device
// and command line (ps): what eviction needs.
func (c *Control) Clients(ctx context.Context) ([]Client, error) {
	return c.ps(ctx)
}

// ServerClients lists the clients of one server (ps -p <server>).
func (c *Control) ServerClients(ctx context.Context, server PID) ([]Client, error) {
	if err := server.Validate(); err != nil {
		return nil, fmt.Errorf("list server clients: %w", err)
	}
	return c.ps(ctx, flagPID, server)
}

func (c *Control) ps(ctx context.Context, params ...param) ([]Client, error) {
	return query(ctx, c, c.cfg.CommandTimeout, "list clients", anyVerb(parsePS), verbPS, params...)
}

// SetDefaultActiveThreadPercentage sets the active-thread percentage of
// servers started afterwards. It is lost when the daemon quits.
func (c *Control) SetDefaultActiveThreadPercentage(ctx context.Context, pct Percentage) error {
	return c.doEmpty(ctx, "set default active thread percentage", verbSetDefaultActiveThreads, pct)
}

// DefaultActiveThreadPercentage returns the default for new servers.
func (c *Control) DefaultActiveThreadPercentage(ctx context.Context) (float64, error) {
	return query(ctx, c, c.cfg.CommandTimeout, "get default active thread percentage", parsePercentage, verbGetDefaultActiveThreads)
}

// SetActiveThreadPercentage sets the percentage of a server's clients
// created afterwards; existing clients keep theirs.
func (c *Control) SetActiveThreadPercentage(ctx context.Context, server PID, pct Percentage) error {
	return c.doEmpty(ctx, "set active thread percentage", verbSetActiveThreads, server, pct)
}

// ActiveThreadPercentage returns a server's percentage for new clients.
func (c *Control) ActiveThreadPercentage(ctx context.Context, server PID) (float64, error) {
	return query(ctx, c, c.cfg.CommandTimeout, "get active thread percentage", parsePercentage, verbGetActiveThreads, server)
}

// SetDefaultDevicePinnedMemLimit sets the default per-client pinned memory
// limit on dev for servers started afterwards.
func (c *Control) SetDefaultDevicePinnedMemLimit(ctx context.Context, dev Device, limit MemLimit) error {
	return c.doEmpty(ctx, "set default pinned memory limit", verbSetDefaultPinnedMemLimit, dev, limit)
}

// DefaultDevicePinnedMemLimit returns the default limit on dev (0: none).
func (c *Control) DefaultDevicePinnedMemLimit(ctx context.Context, dev Device) (MemLimit, error) {
	return query(ctx, c, c.cfg.CommandTimeout, "get default pinned memory limit", parseMemLimit, verbGetDefaultPinnedMemLimit, dev)
}

// SetDevicePinnedMemLimit sets the pinned memory limit on dev of a server's
// clients created afterwards.
func (c *Control) SetDevicePinnedMemLimit(ctx context.Context, server PID, dev Device, limit MemLimit) error {
	return c.doEmpty(ctx, "set pinned memory limit", verbSetPinnedMemLimit, server, dev, limit)
}

// DevicePinnedMemLimit returns a server's limit on dev (0: none).
func (c *Control) DevicePinnedMemLimit(ctx context.Context, server PID, dev Device) (MemLimit, error) {
	return query(ctx, c, c.cfg.CommandTimeout, "get pinned memory limit", parseMemLimit, verbGetPinnedMemLimit, server, dev)
}

// SetDefaultClientPriority sets the priority of clients created afterwards.
func (c *Control) SetDefaultClientPriority(ctx context.Context, p Priority) error {
	return c.doEmpty(ctx, "set default client priority", verbSetDefaultClientPriority, p)
}

// DefaultClientPriority returns the priority of new clients.
func (c *Control) DefaultClientPriority(ctx context.Context) (Priority, error) {
	return query(ctx, c, c.cfg.CommandTimeout, "get default client priority", anyVerb(parsePriority), verbGetDefaultClientPriority)
}

// TerminateClient ends all outstanding GPU work of a client of a server
// (terminate_client). On success the client sees
// CUDA_ERROR_MPS_CLIENT_TERMINATED and can then be killed safely; a signal
// first could wedge the server and every client on it.
func (c *Control) TerminateClient(ctx context.Context, server, client PID) error {
	out, err := c.do(ctx, c.cfg.CommandTimeout, verbTerminateClient, server, client)
	if err == nil {
		err = parseTerminate(out)
	}
	if err != nil {
		return fmt.Errorf("terminate client %d of server %d: %w", client, server, err)
	}
	return nil
}

// ShutdownServer asks a server to shut down (shutdown_server), at once with
// force. Its clients, the inference server's included, lose the GPU.
func (c *Control) ShutdownServer(ctx context.Context, server PID, force bool) error {
	params := []param{server}
	if force {
		params = append(params, flagForce)
	}
	return c.doEmpty(ctx, fmt.Sprintf("shut down server %d", server), verbShutdownServer, params...)
}

// StartServer starts a server for a user ahead of its clients (start_server).
func (c *Control) StartServer(ctx context.Context, uid UID) error {
	return c.doEmpty(ctx, fmt.Sprintf("start server for uid %d", uid), verbStartServer, flagUID, uid)
}

// Quit stops the daemon (quit), only if this colocd started it: colocd never
// quits a daemon it did not start (ErrNotStarted). The health loop does not
// restart a daemon that was quit.
func (c *Control) Quit(ctx context.Context) error {
	c.mu.Lock()
	started, daemon := c.started, c.daemon
	c.mu.Unlock()
	if !started {
		return fmt.Errorf("quit daemon: %w", ErrNotStarted)
	}
	if err := c.doEmpty(ctx, fmt.Sprintf("quit daemon %d", daemon), verbQuit); err != nil {
		return err
	}
	c.mu.Lock()
	c.started, c.owned = false, false
	c.mu.Unlock()
	removeOwner(c.cfg.PipeDir, daemon)
	return nil
}

// serverUID reads a server's user from the proc file system; nil when it
// cannot be read (no such process in this PID namespace).
func (c *Control) serverUID(server PID) *UID {
	uid, err := proc.Table{Root: c.cfg.ProcDir}.UID(int(server))
	if err != nil {
		return nil
	}
	u := UID(uid)
	return &u
}

// ServerUser asks the daemon now (get_server_list) which user its server
// serves: the UID of the first listed server whose user can be read, and
// that server's PID. ok is false when no server runs or none's user can
// be read. An MPS server serves one user at a time.
func (c *Control) ServerUser(ctx context.Context) (uid UID, server PID, ok bool, err error) {
	servers, err := c.ServerPIDs(ctx)
	if err != nil {
		return 0, 0, false, err
	}
	sh := make([]ServerHealth, 0, len(servers))
	for _, s := range servers {
		sh = append(sh, ServerHealth{PID: s, UID: c.serverUID(s)})
	}
	uid, server, ok = firstUser(sh)
	return uid, server, ok, nil
}
