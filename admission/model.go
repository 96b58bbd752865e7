package admission

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/colocd/colocd/internal/cache"
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
	cal *predictor.Calibration
	// calPoint is cal without its fits' parameter intervals, what the
	// model predicts with at confidence 0: the upper end is not read
	// there, and widening by the parameters would cost six simulations for
	// the same point estimates.
	calPoint   *predictor.Calibration
	requests   int
	seed       uint64
	sms        int
	confidence float64
	calKey     digest.Key
	// instance is the MIG instance every prediction runs on; nil: the
	// whole GPU.
	instance *predictor.Instance
	// maxEvents is each prediction's work budget (0: the predictor's).
	maxEvents float64

	cache        *cache.LRU[digest.Key, *cacheEntry]
	hits, misses atomic.Uint64

	mu   sync.Mutex
	free []*predictor.Predictor
}

type cacheEntry struct {
	lats []Latency // one per service, in order
	// err is a refusal to simulate (predictor.ErrTooManyEvents): kept so
	// that the same inputs again cost nothing.
	err error
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
func NewModel(cal *predictor.Calibration, requests int, seed uint64, sms int, confidence float64, opts ...ModelOption) (*Model, error) {
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
	calPoint := cal
	if confidence == 0 {
		c := *cal
		c.Fit = nil
		if c.MPS != nil {
			m := *c.MPS
			m.Fit = nil
			c.MPS = &m
		}
		calPoint = &c
	}
	m := &Model{
		cal: cal, calPoint: calPoint, requests: requests, seed: seed, sms: sms, confidence: confidence,
		calKey: sha256.Sum256(calJSON),
		cache:  cache.New[digest.Key, *cacheEntry](DefaultCacheEntries),
	}
	for _, o := range opts {
		o(m)
	}
	if in := m.instance; in != nil {
		m.sms = in.SMs
	}
	return m, nil
}

// ModelOption sets an optional part of a Model.
type ModelOption func(*Model)

// OnInstance makes every prediction run on a MIG instance
// (predictor.Scenario.Instance): profiles scale to its SMs and bandwidth,
// and percentages are of its SMs.
func OnInstance(in predictor.Instance) ModelOption {
	return func(m *Model) { m.instance = &in }
}

// WithEventBudget sets each prediction's work budget in estimated kernel
// events (predictor.Scenario.MaxEvents; 0: predictor.MaxEvents): a
// request whose profile is over it is refused before it is simulated.
func WithEventBudget(events float64) ModelOption {
	return func(m *Model) { m.maxEvents = events }
}

var _ KnowingPredictor = (*Model)(nil)

// Known reports whether PredictP99 with these inputs would answer from the
// cache. It does not count as a hit or a miss.
func (m *Model) Known(svcs []ServiceSpec, _ int, trainers []Trainer, mode predictor.Mode) bool {
	return m.cache.Contains(m.key(svcs, trainers, mode))
}

// PredictP99 predicts svcs[i]'s p99 latency with every service of svcs and
// the trainers co-located under mode, from the cache when the same inputs
// were predicted before: one simulation answers for every service.
func (m *Model) PredictP99(ctx context.Context, svcs []ServiceSpec, i int, trainers []Trainer, mode predictor.Mode) (Latency, error) {
	if err := ctx.Err(); err != nil {
		return Latency{}, err
	}
	if i < 0 || i >= len(svcs) {
		return Latency{}, fmt.Errorf("predict: service %d of %d", i, len(svcs))
	}
	key := m.key(svcs, trainers, mode)
	if e, ok := m.lookup(key); ok {
		if e.err != nil {
			return Latency{}, e.err
		}
		return e.lats[i], nil
	}
	lats, err := m.simulate(ctx, svcs, trainers, mode)
	if errors.Is(err, predictor.ErrTooManyEvents) {
		m.insert(key, nil, err) // the same profile again is refused at once
	}
	if err != nil {
		return Latency{}, err
	}
	m.insert(key, lats, nil)
	return lats[i], nil
}

// simulate runs one prediction of every service on a pooled
// predictor.Predictor, as `colocd predict` does with one --inference per
// service in their order.
func (m *Model) simulate(ctx context.Context, svcs []ServiceSpec, trainers []Trainer, mode predictor.Mode) ([]Latency, error) {
	sc := &predictor.Scenario{
		// A request whose deadline passes stops its simulation: the work a
		// hostile profile costs ends with its caller's wait.
		Done:       ctx.Done(),
		Inference:  svcs[0].Profile,
		RateRPS:    svcs[0].RateRPS,
		BurstSteps: svcs[0].BurstSteps,
		Requests:   m.requests,
		MaxEvents:  m.maxEvents,
		Seed:       m.seed,
		DeviceSMs:  m.sms,
		Instance:   m.instance,
		// The intervals' level: the default's when admission holds the
		// point estimate (the bound is then not read).
		Confidence: m.confidence,
	}
	for _, o := range svcs[1:] {
		sc.Others = append(sc.Others, predictor.OtherService{Profile: o.Profile, RateRPS: o.RateRPS, BurstSteps: o.BurstSteps})
	}
	for _, t := range trainers {
		sc.Training = append(sc.Training, t.Profile)
		if mode == predictor.ModeMPS {
			sc.TrainingPct = append(sc.TrainingPct, float64(t.Pct))
		}
	}
	pr := m.acquire()
	defer m.release(pr)
	pred, err := pr.Predict(sc, mode, m.calPoint)
	if err != nil {
		if len(svcs) == 1 {
			return nil, fmt.Errorf("predict %s: %w", svcs[0].Name, err)
		}
		return nil, fmt.Errorf("predict %d services: %w", len(svcs), err)
	}
	lats := make([]Latency, len(pred.Services))
	thr := make([]float64, len(pred.Training))
	for k, tp := range pred.Training {
		thr[k] = tp.Throughput
	}
	for j, sp := range pred.Services {
		// An engine's SLO is on its steps: their service_ms.
		got, solo, iv := sp.LatencyMS, sp.SoloLatencyMS, sp.LatencyInterval
		if svcs[j].BurstSteps > 0 {
			got, solo, iv = sp.ServiceMS, sp.SoloServiceMS, sp.ServiceInterval
		}
		lats[j] = Latency{P99MS: got.P99, SoloP99MS: solo.P99, Throughput: thr}
		if m.confidence > 0 {
			lats[j].P99HighMS = iv.P99[1]
		}
	}
	return lats, nil
}

// key hashes every input of a prediction.
func (m *Model) key(svcs []ServiceSpec, trainers []Trainer, mode predictor.Mode) digest.Key {
	var h digest.Hasher
	h.Key(m.calKey)
	h.String(string(mode))
	h.Int(m.requests)
	h.Float64(m.maxEvents)
	h.Uint64(m.seed)
	h.Int(m.sms)
	h.Float64(m.confidence)
	h.Bool(m.instance != nil)
	if in := m.instance; in != nil {
		h.Int(in.SMs)
		h.Int(in.GPUSMs)
		h.Float64(in.Bandwidth)
	}
	h.Int(len(svcs))
	for _, svc := range svcs {
		h.String(svc.Name)
		h.Key(svc.profileKey())
		h.Float64(svc.RateRPS)
		h.Float64(svc.BurstSteps)
	}
	h.Int(len(trainers))
	for _, t := range trainers {
		h.Key(t.profileKey())
		if mode == predictor.ModeMPS {
			h.Int(t.Pct)
		}
	}
	return h.Sum()
}

func (m *Model) lookup(key digest.Key) (*cacheEntry, bool) {
	e, ok := m.cache.Get(key)
	if ok {
		m.hits.Add(1)
	} else {
		m.misses.Add(1)
	}
	return e, ok
}

func (m *Model) insert(key digest.Key, lats []Latency, err error) {
	m.cache.Add(key, &cacheEntry{lats: lats, err: err}, 1)
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
	n, _ := m.cache.Len()
	return ModelStats{Hits: m.hits.Load(), Misses: m.misses.Load(), Entries: n}
}

// Purge empties the cache (a calibration or profile file changed in place;
// benchmarks of cold decisions).
func (m *Model) Purge() { m.cache.Purge() }
