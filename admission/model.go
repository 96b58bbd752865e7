package admission

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/colocd/colocd/internal/digest"
	"github.com/colocd/colocd/predictor"
)

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
	cal        *predictor.Calibration
	requests   int
	seed       uint64
	sms        int
	confidence float64
	calKey     digest.Key

	mu    sync.Mutex
	free  []*predictor.Predictor
	cache *list.List // of *cacheEntry, most recent first
	index map[digest.Key]*list.Element
	stats ModelStats
}

type cacheEntry struct {
	key digest.Key
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
// inference profile's), as in `colocd predict`. With confidence in
// [0.5, 1) each Latency carries the p99's upper bound at that level, which
// decisions hold to the limit; 0 leaves it out.
func NewModel(cal *predictor.Calibration, requests int, seed uint64, sms int, confidence float64) (*Model, error) {
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
	if confidence != 0 && !(confidence >= 0.5 && confidence < 1) {
		return nil, fmt.Errorf("new model: confidence: want a level in [0.5, 1) or 0, got %g", confidence)
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
		cal: cal, requests: requests, seed: seed, sms: sms, confidence: confidence,
		calKey: sha256.Sum256(calJSON),
		cache:  list.New(),
		index:  map[digest.Key]*list.Element{},
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
		// The intervals' level: the default's when admission holds the
		// point estimate (the bound is then not read).
		Confidence: m.confidence,
	}
	for _, t := range trainers {
		sc.Training = append(sc.Training, t.Profile)
		if mode == predictor.ModeMPS {
			sc.TrainingPct = append(sc.TrainingPct, float64(t.Pct))
		}
	}
	pr := m.acquire()
	defer m.release(pr)
	pred, err := pr.Predict(sc, mode, m.cal)
	if err != nil {
		return Latency{}, fmt.Errorf("predict %s: %w", svc.Name, err)
	}
	lat := Latency{P99MS: pred.Inference.LatencyMS.P99, SoloP99MS: pred.Inference.SoloLatencyMS.P99}
	if m.confidence > 0 {
		lat.P99HighMS = pred.Inference.LatencyInterval.P99[1]
	}
	return lat, nil
}

// key hashes every input of a prediction.
func (m *Model) key(svc ServiceSpec, trainers []Trainer, mode predictor.Mode) digest.Key {
	var h digest.Hasher
	h.Key(m.calKey)
	h.String(string(mode))
	h.Int(m.requests)
	h.Uint64(m.seed)
	h.Int(m.sms)
	h.Float64(m.confidence)
	h.String(svc.Name)
	h.Key(svc.profileKey())
	h.Float64(svc.RateRPS)
	h.Int(len(trainers))
	for _, t := range trainers {
		h.Key(t.profileKey())
		if mode == predictor.ModeMPS {
			h.Int(t.Pct)
		}
	}
	return h.Sum()
}

func (m *Model) lookup(key digest.Key) (Latency, bool) {
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

func (m *Model) insert(key digest.Key, lat Latency) {
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
}
