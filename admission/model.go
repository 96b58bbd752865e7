package admission

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"sync"

	"github.com/colocd/colocd/predictor"
)

// ProfileKey is a content hash of the parts of a profile a prediction
// depends on (name, kind, device, ops or summary; not notes or source).
type ProfileKey [32]byte

// KeyOf hashes p. It walks every op, so compute it once per profile.
func KeyOf(p *predictor.Profile) ProfileKey {
	h := hasher{h: sha256.New(), buf: make([]byte, 0, hasherFlush+64)}
	h.str(p.Format)
	h.str(p.Name)
	h.str(string(p.Kind))
	h.str(p.Device.Name)
	h.u64(uint64(p.Device.SMs))
	h.f64(p.MemoryMiB)
	h.u64(uint64(len(p.Ops)))
	for i := range p.Ops {
		op := &p.Ops[i]
		h.str(op.Name)
		h.f64(op.DurUS)
		h.f64(op.GapUS)
		h.f64(op.SM)
		h.f64(op.Occupancy)
		h.optF64(op.DRAM)
		h.optF64(op.L2)
	}
	if s := p.Summary; s != nil {
		h.u64(1)
		h.f64(s.LatencyMS)
		h.f64(s.IterationMS)
		h.f64(s.GPUUtil)
		h.f64(s.MemUtil)
	} else {
		h.u64(0)
	}
	return h.sum()
}

// hasher writes values unambiguously (fixed width, strings length-prefixed)
// into a buffer that it hashes in large writes: a real profile is thousands
// of 8-byte values, and one Write each cost more than the hashing.
type hasher struct {
	h   hash.Hash
	buf []byte
}

const hasherFlush = 8 << 10

func (h *hasher) u64(v uint64) {
	h.buf = binary.LittleEndian.AppendUint64(h.buf, v)
	if len(h.buf) >= hasherFlush {
		h.flush()
	}
}
func (h *hasher) f64(v float64) { h.u64(math.Float64bits(v)) }

func (h *hasher) str(s string) {
	h.u64(uint64(len(s)))
	h.buf = append(h.buf, s...)
	if len(h.buf) >= hasherFlush {
		h.flush()
	}
}

func (h *hasher) bytes(b []byte) {
	h.buf = append(h.buf, b...)
}

func (h *hasher) optF64(v *float64) {
	if v == nil {
		h.u64(0)
		return
	}
	h.u64(1)
	h.f64(*v)
}

func (h *hasher) flush() {
	h.h.Write(h.buf)
	h.buf = h.buf[:0]
}

// sum flushes and returns the digest.
func (h *hasher) sum() (out [32]byte) {
	h.flush()
	h.h.Sum(out[:0])
	return out
}

// DefaultCacheEntries bounds a Model's cache: far more than the lease sets
// and percentages of a day's decisions, a few MB at most.
const DefaultCacheEntries = 4096

// Model is the Predictor built on predictor.Predictor, with an LRU cache of
// results keyed by every input (service, rate, trainer profiles and
// percentages in order, mode, requests, seed, SMs, calibration). Its figures
// equal `colocd predict` with the same calibration, --requests, --seed and
// --sms. Safe for concurrent use: it keeps one predictor.Predictor per
// concurrent caller.
type Model struct {
	cal      *predictor.Calibration
	mps      predictor.MPSParams
	requests int
	seed     uint64
	sms      int
	calKey   [32]byte

	mu      sync.Mutex
	free    []*predictor.Predictor
	cache   *list.List // of *cacheEntry, most recent first
	index   map[[32]byte]*list.Element
	svcKeys map[*predictor.Profile]ProfileKey
	stats   ModelStats
}

type cacheEntry struct {
	key [32]byte
	lat Latency
}

// ModelStats counts cache hits and misses; a miss is one simulation.
type ModelStats struct {
	Hits, Misses uint64
	Entries      int
}

// NewModel returns a Model that predicts with cal's parameters, requests
// simulated requests (0: predictor.DefaultRequests) from arrival seed seed;
// MPS percentages round to sms SMs (0: the calibration's device, else the
// inference profile's), as in `colocd predict`.
func NewModel(cal *predictor.Calibration, requests int, seed uint64, sms int) (*Model, error) {
	if cal == nil {
		return nil, errors.New("new model: no calibration")
	}
	if err := cal.Validate(); err != nil {
		return nil, fmt.Errorf("new model: %w", err)
	}
	if requests < 0 {
		return nil, fmt.Errorf("new model: requests: want a count ≥ 0 (0: %d), got %d", predictor.DefaultRequests, requests)
	}
	if sms < 0 {
		return nil, fmt.Errorf("new model: sms: want an SM count ≥ 0 (0: the calibration's), got %d", sms)
	}
	if requests == 0 {
		requests = predictor.DefaultRequests
	}
	if sms == 0 {
		sms = cal.Device.SMs
	}
	calJSON, err := json.Marshal(cal)
	if err != nil {
		return nil, fmt.Errorf("new model: %w", err)
	}
	return &Model{
		cal: cal, mps: cal.MPS.Params(), requests: requests, seed: seed, sms: sms,
		calKey:  sha256.Sum256(calJSON),
		cache:   list.New(),
		index:   map[[32]byte]*list.Element{},
		svcKeys: map[*predictor.Profile]ProfileKey{},
	}, nil
}

var _ KnowingPredictor = (*Model)(nil)

// Known reports whether PredictP99 with these inputs would answer from the
// cache. It does not count as a hit or a miss.
func (m *Model) Known(svc ServiceSpec, trainers []Trainer, mode predictor.Mode) bool {
	key := m.key(svc, trainers, mode)
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.index[key]
	return ok
}

// PredictP99 predicts svc's p99 latency with trainers co-located under mode,
// from the cache when the same inputs were predicted before.
func (m *Model) PredictP99(ctx context.Context, svc ServiceSpec, trainers []Trainer, mode predictor.Mode) (Latency, error) {
	if err := ctx.Err(); err != nil {
		return Latency{}, err
	}
	if mode != predictor.ModeMPS && mode != predictor.ModeTimeslice {
		return Latency{}, fmt.Errorf("predict: unknown mode %q", mode)
	}
	key := m.key(svc, trainers, mode)
	if lat, ok := m.lookup(key); ok {
		return lat, nil
	}
	lat, err := m.simulate(svc, trainers, mode)
	if err != nil {
		return Latency{}, err
	}
	m.insert(key, lat)
	return lat, nil
}

// simulate runs one prediction on a pooled predictor.Predictor.
func (m *Model) simulate(svc ServiceSpec, trainers []Trainer, mode predictor.Mode) (Latency, error) {
	sc := &predictor.Scenario{
		Inference: svc.Profile,
		RateRPS:   svc.RateRPS,
		Requests:  m.requests,
		Seed:      m.seed,
		DeviceSMs: m.sms,
	}
	for _, t := range trainers {
		sc.Training = append(sc.Training, t.Profile)
		if mode == predictor.ModeMPS {
			sc.TrainingPct = append(sc.TrainingPct, float64(t.Pct))
		}
	}
	pr := m.acquire()
	defer m.release(pr)
	var (
		pred *predictor.Prediction
		err  error
	)
	if mode == predictor.ModeMPS {
		pred, err = pr.PredictMPS(sc, m.mps)
	} else {
		if m.cal.Timeslice == nil {
			return Latency{}, errors.New("predict: the calibration has no timeslice section")
		}
		pred, err = pr.PredictTimeslice(sc, *m.cal.Timeslice)
	}
	if err != nil {
		return Latency{}, fmt.Errorf("predict %s: %w", svc.Name, err)
	}
	return Latency{P99MS: pred.Inference.LatencyMS.P99, SoloP99MS: pred.Inference.SoloLatencyMS.P99}, nil
}

// key hashes every input of a prediction.
func (m *Model) key(svc ServiceSpec, trainers []Trainer, mode predictor.Mode) [32]byte {
	var buf [512]byte
	h := hasher{h: sha256.New(), buf: buf[:0]}
	h.bytes(m.calKey[:])
	h.str(string(mode))
	h.u64(uint64(m.requests))
	h.u64(m.seed)
	h.u64(uint64(m.sms))
	h.str(svc.Name)
	sk := m.serviceKey(svc.Profile)
	h.bytes(sk[:])
	h.f64(svc.RateRPS)
	h.u64(uint64(len(trainers)))
	for _, t := range trainers {
		k := t.Key
		if k == (ProfileKey{}) {
			k = KeyOf(t.Profile)
		}
		h.bytes(k[:])
		if mode == predictor.ModeMPS {
			h.u64(uint64(t.Pct))
		}
	}
	return h.sum()
}

// serviceKey memoises service profiles' keys by pointer: services change
// only on reload, so the map stays small (and is reset if it grows).
func (m *Model) serviceKey(p *predictor.Profile) ProfileKey {
	m.mu.Lock()
	k, ok := m.svcKeys[p]
	m.mu.Unlock()
	if ok {
		return k
	}
	k = KeyOf(p)
	m.mu.Lock()
	if len(m.svcKeys) >= 64 {
		clear(m.svcKeys)
	}
	m.svcKeys[p] = k
	m.mu.Unlock()
	return k
}

func (m *Model) lookup(key [32]byte) (Latency, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.index[key]; ok {
		m.cache.MoveToFront(el)
		m.stats.Hits++
		return el.Value.(*cacheEntry).lat, true
	}
	m.stats.Misses++
	return Latency{}, false
}

func (m *Model) insert(key [32]byte, lat Latency) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.index[key]; ok { // a concurrent caller got there first
		m.cache.MoveToFront(el)
		return
	}
	m.index[key] = m.cache.PushFront(&cacheEntry{key: key, lat: lat})
	for m.cache.Len() > DefaultCacheEntries {
		old := m.cache.Back()
		m.cache.Remove(old)
		delete(m.index, old.Value.(*cacheEntry).key)
	}
}

func (m *Model) acquire() *predictor.Predictor {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.free); n > 0 {
		pr := m.free[n-1]
		m.free = m.free[:n-1]
		return pr
	}
	return new(predictor.Predictor)
}

func (m *Model) release(pr *predictor.Predictor) {
	m.mu.Lock()
	m.free = append(m.free, pr)
	m.mu.Unlock()
}

// Stats returns the cache counters.
func (m *Model) Stats() ModelStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Entries = m.cache.Len()
	return s
}

// Purge empties the cache (a calibration or profile file changed in place;
// benchmarks of cold decisions).
func (m *Model) Purge() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cache.Init()
	clear(m.index)
	clear(m.svcKeys)
}
