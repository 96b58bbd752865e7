package mps

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// SimConfig configures a Sim.
type SimConfig struct {
	// Device is the simulated GPU; ps shows its partial UUID. Empty: an
	// all-zero UUID.
	Device UUID
	// UID is the user whose server AddClient's clients join.
	UID UID
	// Defaults are applied by Ensure, as Control applies them.
	Defaults Defaults
}

// Sim is an MPS control daemon simulated in memory, for machines without a
// GPU: the same methods as Control with the same validation, whose clients
// are registered by the caller (AddClient, as the sidecar does for its own
// grants) and removed by TerminateClient or RemoveClient. Safe for
// concurrent use.
type Sim struct {
	cfg    SimConfig
	health healthTracker

	mu         sync.Mutex
	running    bool
	defaultPct Percentage
	defaultMem map[string]MemLimit
	priority   Priority
	servers    map[PID]*simServer
	nextServer PID
	fault      string
}

type simServer struct {
	uid     UID
	state   ServerState
	pct     Percentage
	mem     map[string]MemLimit
	clients []Client
	nextID  int
}

// simServerBase is the first PID given to a simulated server: high, so that
// it does not collide with the real PIDs of registered clients.
const simServerBase = MaxPID - 4096

// simNamespace is the PID namespace ps shows for simulated clients (the
// usual inode of the initial PID namespace).
const simNamespace = 4026531836

// NewSim returns a Sim that is not running until Ensure.
func NewSim(cfg SimConfig) (*Sim, error) {
	if cfg.Device == "" {
		cfg.Device = "GPU-00000000-0000-0000-0000-000000000000"
	}
	if err := cfg.Device.Validate(); err != nil {
		return nil, fmt.Errorf("sim config: device: %w", err)
	}
	if err := cfg.UID.Validate(); err != nil {
		return nil, fmt.Errorf("sim config: %w", err)
	}
	if err := cfg.Defaults.Validate(); err != nil {
		return nil, fmt.Errorf("sim config: %w", err)
	}
	return &Sim{cfg: cfg}, nil
}

// Ensure starts the simulated daemon if it is not running (with the
// documented defaults: 100 %, no memory limit, normal priority) and applies
// the configured defaults.
func (s *Sim) Ensure(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ensure daemon: %w", err)
	}
	s.mu.Lock()
	if !s.running {
		s.running, s.defaultPct, s.priority, s.fault = true, 100, PriorityNormal, ""
		s.defaultMem, s.servers, s.nextServer = map[string]MemLimit{}, map[PID]*simServer{}, simServerBase
	}
	d := s.cfg.Defaults
	if d.ActiveThreadPct != 0 {
		s.defaultPct = d.ActiveThreadPct
	}
	if d.PinnedMemLimit != 0 {
		s.defaultMem[DeviceUUID(s.cfg.Device).arg()] = d.PinnedMemLimit
	}
	if d.ClientPriority != nil {
		s.priority = *d.ClientPriority
	}
	s.mu.Unlock()
	s.health.set(s.snapshot(StateReady, "simulated daemon running"))
	return nil
}

// Close does nothing: the simulated daemon lives as long as the Sim.
func (s *Sim) Close(context.Context) error { return nil }

// Run waits for ctx to end: the simulated daemon needs no probing (SetFault
// changes its health at once). It returns nil.
func (s *Sim) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Health returns the simulated daemon's health.
func (s *Sim) Health() Health { return s.health.get() }

// Subscribe is Control.Subscribe for the simulated daemon.
func (s *Sim) Subscribe() (<-chan Health, func()) { return s.health.subscribe() }

// SetFault puts every server in FAULT and the health in StateFault, as a
// client's fatal GPU fault does; new clients are refused until ClearFault.
func (s *Sim) SetFault(reason string) {
	s.mu.Lock()
	s.fault = reason
	for _, sv := range s.servers {
		sv.state = ServerFault
	}
	s.mu.Unlock()
	s.health.set(s.snapshot(StateFault, "simulated fault: "+reason))
}

// ClearFault makes every server ACTIVE again.
func (s *Sim) ClearFault() {
	s.mu.Lock()
	s.fault = ""
	for _, sv := range s.servers {
		sv.state = ServerActive
	}
	running := s.running
	s.mu.Unlock()
	if running {
		s.health.set(s.snapshot(StateReady, "simulated daemon running"))
	}
}

// AddClient registers a client process as the real daemon would when it
// connects: it joins the server of the configured UID (started on demand)
// with the lower of pct and the server's active-thread percentage.
func (s *Sim) AddClient(pid PID, pct Percentage) error {
	if err := pid.Validate(); err != nil {
		return fmt.Errorf("add client: %w", err)
	}
	if err := pct.Validate(); err != nil {
		return fmt.Errorf("add client: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return fmt.Errorf("add client %d: %w", pid, ErrNotRunning)
	}
	if _, _, ok := s.findClient(pid); ok {
		return fmt.Errorf("add client %d: %w: already registered", pid, ErrInvalidArgument)
	}
	server := s.serverFor(s.cfg.UID)
	sv := s.servers[server]
	if sv.state != ServerActive {
		return fmt.Errorf("add client %d: server %d is %s: %w", pid, server, sv.state, ErrServerNotReady)
	}
	sv.clients = append(sv.clients, Client{
		PID: pid, ID: sv.nextID, Server: server, Device: string(s.cfg.Device)[:22],
		Namespace: simNamespace, Command: "colocd-sim-client", ActiveThreadPct: float64(min(pct, sv.pct)),
	})
	sv.nextID++
	return nil
}

// RemoveClient forgets a client that exited.
func (s *Sim) RemoveClient(pid PID) error {
	if err := pid.Validate(); err != nil {
		return fmt.Errorf("remove client: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, i, ok := s.findClient(pid)
	if !ok {
		return fmt.Errorf("remove client %d: %w", pid, ErrUnknownClient)
	}
	sv.clients = slices.Delete(sv.clients, i, i+1)
	return nil
}

// serverFor returns the server of uid, starting one if needed. s.mu held.
func (s *Sim) serverFor(uid UID) PID {
	for pid, sv := range s.servers {
		if sv.uid == uid {
			return pid
		}
	}
	pid := s.nextServer
	s.nextServer++
	state := ServerActive
	if s.fault != "" {
		state = ServerFault
	}
	s.servers[pid] = &simServer{uid: uid, state: state, pct: s.defaultPct, mem: maps.Clone(s.defaultMem)}
	return pid
}

func (s *Sim) findClient(pid PID) (*simServer, int, bool) {
	for _, sv := range s.servers {
		for i, c := range sv.clients {
			if c.PID == pid {
				return sv, i, true
			}
		}
	}
	return nil, 0, false
}

// begin validates a command as Control would build it, then checks ctx and
// that the daemon runs, and returns with s.mu held.
func (s *Sim) begin(ctx context.Context, what, verb string, params ...param) error {
	if _, err := newCommand(verb, params...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return fmt.Errorf("%s: %w", what, ErrNotRunning)
	}
	return nil
}

// locked runs fn with s.mu held, once begin has accepted the command.
func (s *Sim) locked(ctx context.Context, what, verb string, fn func(), params ...param) error {
	if err := s.begin(ctx, what, verb, params...); err != nil {
		return err
	}
	defer s.mu.Unlock()
	fn()
	return nil
}

// server returns a server by PID. s.mu held.
func (s *Sim) server(what string, pid PID) (*simServer, error) {
	sv, ok := s.servers[pid]
	if !ok {
		return nil, fmt.Errorf("%s: server %d: %w", what, pid, ErrUnknownServer)
	}
	return sv, nil
}

// ServerPIDs is Control.ServerPIDs.
func (s *Sim) ServerPIDs(ctx context.Context) ([]PID, error) {
	if err := s.begin(ctx, "list servers", verbGetServerList); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	pids := make([]PID, 0, len(s.servers))
	for pid := range s.servers {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids, nil
}

// ServerUser is Control.ServerUser: the user of the simulated server with
// the lowest PID.
func (s *Sim) ServerUser(ctx context.Context) (UID, PID, bool, error) {
	if err := s.begin(ctx, "list servers", verbGetServerList); err != nil {
		return 0, 0, false, err
	}
	defer s.mu.Unlock()
	var sh []ServerHealth
	for pid, sv := range s.servers {
		uid := sv.uid
		sh = append(sh, ServerHealth{PID: pid, UID: &uid})
	}
	slices.SortFunc(sh, func(a, b ServerHealth) int { return int(a.PID - b.PID) })
	uid, server, ok := firstUser(sh)
	return uid, server, ok, nil
}

// ServerStatus is Control.ServerStatus.
func (s *Sim) ServerStatus(ctx context.Context, server PID) (ServerState, error) {
	if err := s.begin(ctx, "get server status", verbGetServerStatus, server); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	sv, err := s.server("get server status", server)
	if err != nil {
		return "", err
	}
	return sv.state, nil
}

// ClientPIDs is Control.ClientPIDs.
func (s *Sim) ClientPIDs(ctx context.Context, server PID) ([]PID, error) {
	if err := s.begin(ctx, "list clients", verbGetClientList, server); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sv, err := s.server("list clients", server)
	if err != nil {
		return nil, err
	}
	pids := make([]PID, len(sv.clients))
	for i, c := range sv.clients {
		pids[i] = c.PID
	}
	return pids, nil
}

// Clients is Control.Clients; each Client has its ActiveThreadPct.
func (s *Sim) Clients(ctx context.Context) ([]Client, error) {
	if err := s.begin(ctx, "list clients", verbPS); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []Client
	for _, sv := range s.servers {
		out = append(out, sv.clients...)
	}
	slices.SortFunc(out, func(a, b Client) int { return int(a.PID - b.PID) })
	return out, nil
}

// ServerClients is Control.ServerClients.
func (s *Sim) ServerClients(ctx context.Context, server PID) ([]Client, error) {
	if err := s.begin(ctx, "list server clients", verbPS, flagPID, server); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sv, err := s.server("list server clients", server)
	if err != nil {
		return nil, err
	}
	return slices.Clone(sv.clients), nil
}

// SetDefaultActiveThreadPercentage is Control.SetDefaultActiveThreadPercentage.
func (s *Sim) SetDefaultActiveThreadPercentage(ctx context.Context, pct Percentage) error {
	return s.locked(ctx, "set default active thread percentage", verbSetDefaultActiveThreads, func() { s.defaultPct = pct }, pct)
}

// DefaultActiveThreadPercentage is Control.DefaultActiveThreadPercentage.
func (s *Sim) DefaultActiveThreadPercentage(ctx context.Context) (v float64, err error) {
	err = s.locked(ctx, "get default active thread percentage", verbGetDefaultActiveThreads, func() { v = float64(s.defaultPct) })
	return v, err
}

// SetActiveThreadPercentage is Control.SetActiveThreadPercentage.
func (s *Sim) SetActiveThreadPercentage(ctx context.Context, server PID, pct Percentage) error {
	if err := s.begin(ctx, "set active thread percentage", verbSetActiveThreads, server, pct); err != nil {
		return err
	}
	defer s.mu.Unlock()
	sv, err := s.server("set active thread percentage", server)
	if err != nil {
		return err
	}
	sv.pct = pct
	return nil
}

// ActiveThreadPercentage is Control.ActiveThreadPercentage.
func (s *Sim) ActiveThreadPercentage(ctx context.Context, server PID) (float64, error) {
	if err := s.begin(ctx, "get active thread percentage", verbGetActiveThreads, server); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	sv, err := s.server("get active thread percentage", server)
	if err != nil {
		return 0, err
	}
	return float64(sv.pct), nil
}

// SetDefaultDevicePinnedMemLimit is Control.SetDefaultDevicePinnedMemLimit.
func (s *Sim) SetDefaultDevicePinnedMemLimit(ctx context.Context, dev Device, limit MemLimit) error {
	return s.locked(ctx, "set default pinned memory limit", verbSetDefaultPinnedMemLimit, func() { s.defaultMem[dev.arg()] = limit }, dev, limit)
}

// DefaultDevicePinnedMemLimit is Control.DefaultDevicePinnedMemLimit.
func (s *Sim) DefaultDevicePinnedMemLimit(ctx context.Context, dev Device) (v MemLimit, err error) {
	err = s.locked(ctx, "get default pinned memory limit", verbGetDefaultPinnedMemLimit, func() { v = s.defaultMem[dev.arg()] }, dev)
	return v, err
}

// SetDevicePinnedMemLimit is Control.SetDevicePinnedMemLimit.
func (s *Sim) SetDevicePinnedMemLimit(ctx context.Context, server PID, dev Device, limit MemLimit) error {
	if err := s.begin(ctx, "set pinned memory limit", verbSetPinnedMemLimit, server, dev, limit); err != nil {
		return err
	}
	defer s.mu.Unlock()
	sv, err := s.server("set pinned memory limit", server)
	if err != nil {
		return err
	}
	sv.mem[dev.arg()] = limit
	return nil
}

// DevicePinnedMemLimit is Control.DevicePinnedMemLimit.
func (s *Sim) DevicePinnedMemLimit(ctx context.Context, server PID, dev Device) (MemLimit, error) {
	if err := s.begin(ctx, "get pinned memory limit", verbGetPinnedMemLimit, server, dev); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	sv, err := s.server("get pinned memory limit", server)
	if err != nil {
		return 0, err
	}
	return sv.mem[dev.arg()], nil
}

// SetDefaultClientPriority is Control.SetDefaultClientPriority.
func (s *Sim) SetDefaultClientPriority(ctx context.Context, p Priority) error {
	return s.locked(ctx, "set default client priority", verbSetDefaultClientPriority, func() { s.priority = p }, p)
}

// DefaultClientPriority is Control.DefaultClientPriority.
func (s *Sim) DefaultClientPriority(ctx context.Context) (v Priority, err error) {
	err = s.locked(ctx, "get default client priority", verbGetDefaultClientPriority, func() { v = s.priority })
	return v, err
}

// TerminateClient is Control.TerminateClient: the client is removed.
func (s *Sim) TerminateClient(ctx context.Context, server, client PID) error {
	what := fmt.Sprintf("terminate client %d of server %d", client, server)
	if err := s.begin(ctx, what, verbTerminateClient, server, client); err != nil {
		return err
	}
	defer s.mu.Unlock()
	sv, err := s.server(what, server)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(sv.clients, func(c Client) bool { return c.PID == client })
	if i < 0 {
		return fmt.Errorf("%s: %w: %w", what, ErrTerminateFailed, ErrUnknownClient)
	}
	sv.clients = slices.Delete(sv.clients, i, i+1)
	return nil
}

// ShutdownServer is Control.ShutdownServer: the server and its clients go.
func (s *Sim) ShutdownServer(ctx context.Context, server PID, force bool) error {
	params := []param{server}
	if force {
		params = append(params, flagForce)
	}
	what := fmt.Sprintf("shut down server %d", server)
	if err := s.begin(ctx, what, verbShutdownServer, params...); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.server(what, server); err != nil {
		return err
	}
	delete(s.servers, server)
	return nil
}

// StartServer is Control.StartServer.
func (s *Sim) StartServer(ctx context.Context, uid UID) error {
	if err := s.begin(ctx, fmt.Sprintf("start server for uid %d", uid), verbStartServer, flagUID, uid); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.serverFor(uid)
	return nil
}

// Quit stops the simulated daemon: servers, clients and defaults are lost.
func (s *Sim) Quit(ctx context.Context) error {
	if err := s.begin(ctx, "quit daemon", verbQuit); err != nil {
		return err
	}
	s.running, s.servers = false, nil
	s.mu.Unlock()
	s.health.set(s.snapshot(StateDown, "simulated daemon quit"))
	return nil
}

// snapshot builds the Sim's Health.
func (s *Sim) snapshot(st State, reason string) Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := Health{State: st, Reason: reason, Started: s.running, Owned: s.running}
	for pid, sv := range s.servers {
		uid := sv.uid
		h.Servers = append(h.Servers, ServerHealth{PID: pid, State: sv.state, UID: &uid})
	}
	slices.SortFunc(h.Servers, func(a, b ServerHealth) int { return int(a.PID - b.PID) })
	return h
}
