package gpu

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"
)

// simMemoryMiB is the memory of simulated devices whose name carries no
// size, as nvidia-smi reports it for the real board.
var simMemoryMiB = map[string]uint64{
	"NVIDIA H200": 143771,
}

// simPIDBase is the first made-up PID of a simulated process: above Linux's
// largest pid_max (2^22), so it can never be a real process.
const simPIDBase = 1 << 22

// SimDevice is a simulated GPU for hosts without an NVIDIA driver: a named
// device whose memory is consumed only by the sidecar's own grants (Reserve,
// Release), whose processes are those grants, and whose health tests can
// drive (InjectXID, ResetHealth). It behaves like NVMLDevice otherwise: Run
// applies health changes and logs them, Events reports them.
type SimDevice struct {
	info   Info
	logger *slog.Logger
	mon    *monitor
	ops    chan simOp // health changes waiting for Run

	mu      sync.Mutex
	grants  map[string]simGrant
	nextPID uint32
	runState
}

type simGrant struct {
	mib uint64
	pid uint32
}

// simOp is a health change queued for Run: an XID, or a reset when xid is 0.
type simOp struct{ xid uint64 }

// simQueue is how many injected health changes may wait for Run.
const simQueue = 64

// NewSim builds the simulated device that cfg describes: name cfg.Sim.Name,
// SM count from the table or cfg.SMs, memory from cfg.Sim.MemoryMiB or the
// name, and an index or UUID from cfg.Device. A device selected by index gets
// a made-up UUID that is stable for the same name and index. opts.Logger is
// used by Run only.
func NewSim(cfg Config, opts Options) (*SimDevice, error) {
	sel, err := ParseSelector(cfg.Device)
	if err != nil {
		return nil, err
	}
	if sel.IsMIG() {
		return nil, fmt.Errorf("simulate gpu: gpu.device %s names a MIG device, and the simulated GPU is a whole one", sel)
	}
	name := cfg.Sim.Name
	if name == "" {
		name = DefaultSimName
	}
	info := Info{Backend: BackendSim, Name: name, Index: sel.Index, UUID: sel.UUID, Driver: "sim"}
	if !sel.IsUUID() {
		info.UUID = simUUID(name, sel.Index)
	}
	if info.SMs, info.SMSource, err = resolveSMs(name, cfg.SMs); err != nil {
		return nil, fmt.Errorf("simulate gpu: %w", err)
	}
	if info.MemoryTotalMiB, err = simMemory(name, cfg.Sim.MemoryMiB); err != nil {
		return nil, fmt.Errorf("simulate gpu: %w", err)
	}
	return &SimDevice{
		info:     info,
		logger:   opts.logger(),
		mon:      newMonitor(time.Now()),
		ops:      make(chan simOp, simQueue),
		grants:   map[string]simGrant{},
		nextPID:  simPIDBase,
		runState: newRunState(),
	}, nil
}

// simUUID makes a UUID-shaped id from the name and index, the same on
// every run.
func simUUID(name string, index int) string {
	h := sha256.Sum256([]byte("colocd-sim\x00" + name + "\x00" + strconv.Itoa(index)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// simMemory picks the simulated memory: the configured size, else the
// table, else a size in the name ("…-80GB" is 80 GiB).
func simMemory(name string, configured uint64) (uint64, error) {
	if configured > 0 {
		return configured, nil
	}
	if m, ok := simMemoryMiB[name]; ok {
		return m, nil
	}
	if gb, ok := nameGB(name); ok {
		return gb * 1024, nil
	}
	return 0, fmt.Errorf("no memory size known for simulated device %q: set gpu.sim.memory_mib", name)
}

// nameGB finds a memory size word such as "80GB" in a device name.
func nameGB(name string) (uint64, bool) {
	for _, w := range splitName(name) {
		if n, ok := cutGB(w); ok {
			v, err := strconv.ParseUint(n, 10, 32)
			if err == nil && v > 0 {
				return v, true
			}
		}
	}
	return 0, false
}

// Info returns the simulated device's identity.
func (s *SimDevice) Info() Info { return s.info }

// Health returns the simulated device's health as of the last change Run
// applied.
func (s *SimDevice) Health() Health { return s.mon.current() }

// Events delivers the events Run applies; Run closes it when it returns.
func (s *SimDevice) Events() <-chan Event { return s.mon.events }

// State returns the simulated memory (used is the sum of the grants), the
// grants as compute processes in the order they were reserved, compute mode
// default, MIG unsupported and utilization unknown.
func (s *SimDevice) State(ctx context.Context) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return State{}, ErrClosed
	}
	used := s.usedLocked()
	st := State{
		Time:        time.Now(),
		Memory:      Memory{TotalMiB: s.info.MemoryTotalMiB, UsedMiB: used, FreeMiB: s.info.MemoryTotalMiB - used},
		ComputeMode: ComputeModeDefault,
		Processes:   make([]Process, 0, len(s.grants)),
	}
	for id, g := range s.grants {
		st.Processes = append(st.Processes, Process{PID: g.pid, UsedMiB: int64(g.mib), Grant: id})
	}
	sort.Slice(st.Processes, func(i, j int) bool { return st.Processes[i].PID < st.Processes[j].PID })
	return st, nil
}

func (s *SimDevice) usedLocked() uint64 {
	var used uint64
	for _, g := range s.grants {
		used += g.mib
	}
	return used
}

// Reserve takes mib of the simulated memory for the grant id and shows it
// as a process. It fails with ErrInsufficientMemory when the memory is not
// free and with ErrGrantExists when id already holds memory.
func (s *SimDevice) Reserve(id string, mib uint64) error {
	if id == "" {
		return fmt.Errorf("reserve simulated gpu memory: empty grant id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, ok := s.grants[id]; ok {
		return fmt.Errorf("reserve %d MiB for %q: %w", mib, id, ErrGrantExists)
	}
	if free := s.info.MemoryTotalMiB - s.usedLocked(); mib > free {
		return fmt.Errorf("reserve %d MiB for %q: %w: %d MiB free", mib, id, ErrInsufficientMemory, free)
	}
	s.grants[id] = simGrant{mib: mib, pid: s.nextPID}
	s.nextPID++
	return nil
}

// Release returns the memory of grant id; ErrUnknownGrant if it holds none.
func (s *SimDevice) Release(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.grants[id]; !ok {
		return fmt.Errorf("release %q: %w", id, ErrUnknownGrant)
	}
	delete(s.grants, id)
	return nil
}

// InjectXID makes the simulated driver report xid. Run applies it as it
// would a real one (application-level XIDs leave the device healthy) and
// publishes the event; until Run runs it waits in a queue, and it fails when
// that queue is full or the device is closed.
func (s *SimDevice) InjectXID(xid uint64) error {
	if xid == 0 {
		return fmt.Errorf("inject xid: xid 0 is not an XID")
	}
	return s.enqueue(simOp{xid: xid})
}

// ResetHealth makes the simulated device healthy again, through Run like
// InjectXID; a real device needs a restart of colocd instead.
func (s *SimDevice) ResetHealth() error { return s.enqueue(simOp{}) }

func (s *SimDevice) enqueue(op simOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.ops <- op:
		return nil
	default:
		return fmt.Errorf("simulated gpu: %d health changes already waiting for Run", simQueue)
	}
}

// Run applies injected health changes, logging them, until ctx is done or
// Close is called; it then closes Events and returns nil. It may be called
// once.
func (s *SimDevice) Run(ctx context.Context) error {
	if err := s.begin(&s.mu); err != nil {
		return err
	}
	defer close(s.runDone)
	defer s.mon.close()

	log := s.logger.With("gpu", s.info.UUID)
	log.Info("simulated gpu health loop started", "name", s.info.Name, "memory_mib", s.info.MemoryTotalMiB, "sms", s.info.SMs)
	defer log.Info("simulated gpu health loop stopped")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.stop:
			return nil
		case op := <-s.ops:
			s.apply(op, log)
		}
	}
}

func (s *SimDevice) apply(op simOp, log *slog.Logger) {
	now := time.Now()
	if op.xid == 0 {
		if _, ok := s.mon.reset(now); ok {
			log.Info("simulated gpu healthy again")
		}
		return
	}
	logXID(log, s.mon.xid(op.xid, now))
}

// Close stops Run if it is running and waits for it. Later calls of State,
// Reserve, InjectXID and Run return ErrClosed. It is safe to call more than
// once.
func (s *SimDevice) Close() error {
	s.shut(&s.mu, s.mon)
	return nil
}
