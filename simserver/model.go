package simserver

import (
	"cmp"
	"fmt"
	"math"
	"sync"

	"github.com/colocd/colocd/internal/cache"
	"github.com/colocd/colocd/internal/digest"
	"github.com/colocd/colocd/predictor"
)

// Trainer is a training job running next to the server, at the
// active-thread percentage its processes were started with.
type Trainer struct {
	Profile *predictor.Profile
	// Key is Profile.Key(), computed once per profile; the zero key makes
	// the model compute it on every call, which walks every op.
	Key predictor.ProfileKey
	Pct int
}

// key is Key, or Profile.Key() when the caller left it zero.
func (t *Trainer) key() predictor.ProfileKey {
	if t.Key != (predictor.ProfileKey{}) {
		return t.Key
	}
	return t.Profile.Key()
}

// CacheEntries bounds a Model's cache: the loads a run meets (rates in
// rateStep steps, the trainers' profiles and percentages) are far fewer.
const CacheEntries = 1024

// Model is colocd's predictor for one inference service, with its
// predictions cached: the server asks it once per distinct load. The cache
// (internal/cache) holds CacheEntries, least recently used out first, keyed
// by the load's content (loadKey), so that equal profiles share entries
// and a long run's memory stays bounded.
type Model struct {
	Inference   *predictor.Profile
	Calibration *predictor.Calibration
	Mode        predictor.Mode
	// Requests and Seed are those of each simulation.
	Requests int
	Seed     uint64
	// SMs is the device's SM count (0: the profile's).
	SMs int

	// capacity bounds the cache (0: CacheEntries); tests lower it.
	capacity int

	mu    sync.Mutex // serializes pr, which is not safe for concurrent use
	cache *cache.LRU[digest.Key, predictor.Percentiles]
	pr    predictor.Predictor
}

// rateStep is the rate resolution of the model: rates within it share a
// prediction.
const rateStep = 0.25

// Latency returns the predicted latency percentiles (ms, arrival to
// completion) at rate with trainers.
func (m *Model) Latency(rate float64, trainers []Trainer) (predictor.Percentiles, error) {
	rate = max(rateStep, math.Ceil(rate/rateStep)*rateStep)
	key := loadKey(rate, trainers)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cache == nil {
		m.cache = cache.New[digest.Key, predictor.Percentiles](cmp.Or(m.capacity, CacheEntries))
	}
	if p, ok := m.cache.Get(key); ok {
		return p, nil
	}
	sc := &predictor.Scenario{Inference: m.Inference, RateRPS: rate, Requests: m.Requests, Seed: m.Seed, DeviceSMs: m.SMs}
	for _, t := range trainers {
		sc.Training = append(sc.Training, t.Profile)
		if m.Mode == predictor.ModeMPS {
			sc.TrainingPct = append(sc.TrainingPct, float64(t.Pct))
		}
	}
	pred, err := m.pr.Predict(sc, m.Mode, m.Calibration)
	if err != nil {
		return predictor.Percentiles{}, fmt.Errorf("predict the server's latency at %g req/s: %w", rate, err)
	}
	return m.cache.Add(key, pred.Inference.LatencyMS, 1), nil
}

// loadKey is the content of a load: the rate step, and each trainer's
// profile digest and percentage in order.
func loadKey(rate float64, trainers []Trainer) digest.Key {
	var h digest.Hasher
	h.Float64(rate)
	h.Int(len(trainers))
	for i := range trainers {
		h.Key(trainers[i].key())
		h.Int(trainers[i].Pct)
	}
	return h.Sum()
}

// cacheLen is how many predictions the model holds.
func (m *Model) cacheLen() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cache == nil {
		return 0
	}
	n, _ := m.cache.Len()
	return n
}

// draw returns a latency from the distribution through the percentiles:
// piecewise linear in the quantile between (0, p50/2), (0.5, p50),
// (0.9, p90), (0.95, p95), (0.99, p99) and (1, 1.25 × p99).
func draw(p predictor.Percentiles, u float64) float64 {
	qs := [...]float64{0, 0.5, 0.9, 0.95, 0.99, 1}
	vs := [...]float64{p.P50 / 2, p.P50, p.P90, p.P95, p.P99, 1.25 * p.P99}
	for i := 1; i < len(qs); i++ {
		if u <= qs[i] {
			f := (u - qs[i-1]) / (qs[i] - qs[i-1])
			return vs[i-1] + f*(vs[i]-vs[i-1])
		}
	}
	return vs[len(vs)-1]
}
