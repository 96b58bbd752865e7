package gpu

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	// lend are the simulated MIG devices of gpu.grant_instances.
	lend []Lendable
	runState
}

type simGrant struct {
	mib uint64
	pid uint32
	// on is the lent MIG device the grant runs on ("": the device itself).
	on string
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
	name := cfg.Sim.Name
	if name == "" {
		name = DefaultSimName
	}
	if sel.IsMIG() && len(cfg.Sim.MIG) == 0 {
		return nil, fmt.Errorf("simulate gpu: gpu.device %s names a MIG device, and the simulated GPU is a whole one (gpu.sim.mig partitions it)", sel)
	}
	info := Info{Backend: BackendSim, Name: name, Index: sel.Index, UUID: sel.UUID, Driver: "sim"}
	if !sel.IsUUID() || sel.IsMIG() {
		info.UUID = simUUID(name, sel.Index)
	}
	if sel.Instance && strings.HasPrefix(sel.UUID, "GPU-") {
		info.UUID = sel.UUID
	}
	if info.SMs, info.SMSource, err = resolveSMs(name, cfg.SMs); err != nil {
		return nil, fmt.Errorf("simulate gpu: %w", err)
	}
	if info.MemoryTotalMiB, err = simMemory(name, cfg.Sim.MemoryMiB); err != nil {
		return nil, fmt.Errorf("simulate gpu: %w", err)
	}
	var lend []Lendable
	if len(cfg.Sim.MIG) > 0 {
		gpuInfo := info // the GPU's identity, before info becomes its MIG device's
		migs, err := simMIGDevices(name, info, cfg.Sim.MIG)
		if err != nil {
			return nil, fmt.Errorf("simulate gpu: %w", err)
		}
		own, err := simPick(migs, sel, "gpu.device", info)
		if err != nil {
			return nil, fmt.Errorf("simulate gpu: %w", err)
		}
		if !sel.IsMIG() {
			return nil, fmt.Errorf("simulate gpu: gpu.device %s names the whole GPU, which gpu.sim.mig partitions: name one of its MIG devices (%s)", sel, simNames(migs))
		}
		info.UUID, info.MIG, info.MemoryTotalMiB = own.UUID, &own.MIG, own.Memory.TotalMiB
		info.SMs, info.SMSource = own.SMs, "table"
		if cfg.SMs > 0 {
			info.SMs, info.SMSource = cfg.SMs, "config"
		}
		for i, g := range cfg.GrantInstances {
			gsel, err := ParseSelector(g)
			if err != nil {
				return nil, fmt.Errorf("simulate gpu: gpu.grant_instances[%d]: %w", i, err)
			}
			l, err := simPick(migs, gsel, fmt.Sprintf("gpu.grant_instances[%d]", i), gpuInfo)
			if err != nil {
				return nil, fmt.Errorf("simulate gpu: %w", err)
			}
			if l.UUID == own.UUID || slices.ContainsFunc(lend, func(o Lendable) bool { return o.UUID == l.UUID }) {
				return nil, fmt.Errorf("simulate gpu: gpu.grant_instances[%d] %s: names gpu.device or an instance named before", i, g)
			}
			lend = append(lend, l)
		}
	} else if len(cfg.GrantInstances) > 0 {
		return nil, fmt.Errorf("simulate gpu: gpu.grant_instances needs a partitioned simulated GPU (gpu.sim.mig)")
	}
	return &SimDevice{
		lend:     lend,
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

// HostProcesses is false: the simulated device's processes are the ones
// it was told of, not the host's.
func (s *SimDevice) HostProcesses() bool { return false }

// Health returns the simulated device's health as of the last change Run
// applied.
func (s *SimDevice) Health() Health { return s.mon.current() }

// Events delivers the events Run applies; Run closes it when it returns.
func (s *SimDevice) Events() <-chan Event { return s.mon.events }

// State returns the simulated memory (used is the sum of the grants), the
// grants as compute processes in the order they were reserved, compute mode
// default, MIG enabled when gpu.sim.mig partitions the GPU (else
// unsupported) and utilization unknown.
func (s *SimDevice) State(ctx context.Context) (State, error) {
	if err := s.open(ctx, &s.mu); err != nil {
		return State{}, err
	}
	defer s.mu.Unlock()
	used := s.usedOnLocked("")
	st := State{
		Time:        time.Now(),
		Memory:      Memory{TotalMiB: s.info.MemoryTotalMiB, UsedMiB: used, FreeMiB: s.info.MemoryTotalMiB - used},
		ComputeMode: ComputeModeDefault,
		Processes:   s.processesOnLocked(""),
	}
	if s.info.MIG != nil {
		st.MIG = MIGMode{Supported: true, Enabled: true}
	}
	return st, nil
}

// usedOnLocked is the memory of the grants on device on ("": the device
// itself).
func (s *SimDevice) usedOnLocked(on string) uint64 {
	var used uint64
	for _, g := range s.grants {
		if g.on == on {
			used += g.mib
		}
	}
	return used
}

// processesOnLocked lists the grants on device on as its processes, in the
// order they were reserved.
func (s *SimDevice) processesOnLocked(on string) []Process {
	out := []Process{}
	for id, g := range s.grants {
		if g.on == on {
			out = append(out, Process{PID: g.pid, UsedMiB: int64(g.mib), Grant: id})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// Reserve takes mib of the simulated memory for the grant id and shows it
// as a process. It fails with ErrInsufficientMemory when the memory is not
// free and with ErrGrantExists when id already holds memory.
func (s *SimDevice) Reserve(id string, mib uint64) error { return s.ReserveOn("", id, mib) }

// ReserveOn is Reserve on the lent MIG device uuid (gpu.grant_instances;
// "": the device itself), as a job granted that instance whole shows on
// it.
func (s *SimDevice) ReserveOn(uuid, id string, mib uint64) error {
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
	total := s.info.MemoryTotalMiB
	if uuid != "" {
		i := slices.IndexFunc(s.lend, func(l Lendable) bool { return l.UUID == uuid })
		if i < 0 {
			return fmt.Errorf("reserve %d MiB for %q on %s: %w: not a lent MIG device (gpu.grant_instances)", mib, id, uuid, ErrDeviceNotFound)
		}
		total = s.lend[i].Memory.TotalMiB
	}
	if free := total - s.usedOnLocked(uuid); mib > free {
		return fmt.Errorf("reserve %d MiB for %q: %w: %d MiB free", mib, id, ErrInsufficientMemory, free)
	}
	s.grants[id] = simGrant{mib: mib, pid: s.nextPID, on: uuid}
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
	end, err := s.start(&s.mu, s.mon)
	if err != nil {
		return err
	}
	defer end()

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

// simMIGDevices makes the MIG devices of a simulated GPU partitioned as
// profiles (gpu.sim.mig): GPU instance i+1, compute instance 0, a UUID
// stable for the GPU and the ids, the table's SMs and memory.
func simMIGDevices(name string, gpu Info, names []string) ([]Lendable, error) {
	table, err := MIGProfiles(name)
	if err != nil {
		return nil, err
	}
	layout := simLayout(table, names)
	if layout == nil {
		return nil, fmt.Errorf("gpu.sim.mig %s: the instances do not fit on the GPU together", strings.Join(names, "+"))
	}
	gpuSMs, _ := SMCount(name)
	out := make([]Lendable, len(layout))
	for i, pl := range layout {
		p := pl.Profile
		h := sha256.Sum256([]byte("colocd-sim-mig\x00" + gpu.UUID + "\x00" + strconv.Itoa(i+1)))
		out[i] = Lendable{
			UUID: fmt.Sprintf("MIG-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]),
			MIG: MIGDevice{Name: name + " MIG " + p.Name, Profile: p.Name, ParentUUID: gpu.UUID, GI: i + 1, CI: 0,
				Slices: p.Slices, ComputeSlices: p.Slices, MemorySlices: p.MemorySlices, GPUSMs: gpuSMs},
			SMs:    p.SMs,
			Memory: Memory{TotalMiB: uint64(p.MemoryMiB), FreeMiB: uint64(p.MemoryMiB)},
		}
	}
	return out, nil
}

// simPick finds the simulated MIG device sel names: by its GPU (index or
// UUID) and ids, or by its UUID.
func simPick(migs []Lendable, sel Selector, key string, gpu Info) (Lendable, error) {
	if sel.Instance && (sel.IsUUID() && !strings.EqualFold(sel.UUID, gpu.UUID) || !sel.IsUUID() && sel.Index != gpu.Index) {
		return Lendable{}, fmt.Errorf("%s %s: names another GPU than the simulated one (index %d, %s)", key, sel, gpu.Index, gpu.UUID)
	}
	for _, m := range migs {
		if sel.Instance && sel.GI == m.MIG.GI && sel.CI == m.MIG.CI || strings.EqualFold(sel.UUID, m.UUID) && !sel.Instance {
			return m, nil
		}
	}
	if !sel.IsMIG() {
		return Lendable{}, nil
	}
	return Lendable{}, fmt.Errorf("%s %s: the simulated GPU has no such MIG device; it has %s", key, sel, simNames(migs))
}

// simNames lists simulated MIG devices as "0:1:0 (3g.71gb, MIG-…)".
func simNames(migs []Lendable) string {
	var out []string
	for _, m := range migs {
		out = append(out, fmt.Sprintf("gi %d ci %d (%s, %s)", m.MIG.GI, m.MIG.CI, m.MIG.Profile, m.UUID))
	}
	return strings.Join(out, ", ")
}

// Lendable returns the simulated MIG devices of gpu.grant_instances, each
// with the grants reserved on it (ReserveOn) as its processes and memory.
func (s *SimDevice) Lendable(ctx context.Context) ([]Lendable, error) {
	if err := s.open(ctx, &s.mu); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]Lendable, len(s.lend))
	for i, l := range s.lend {
		used := s.usedOnLocked(l.UUID)
		l.Memory = Memory{TotalMiB: l.Memory.TotalMiB, UsedMiB: used, FreeMiB: l.Memory.TotalMiB - used}
		l.Processes = s.processesOnLocked(l.UUID)
		out[i] = l
	}
	return out, nil
}
