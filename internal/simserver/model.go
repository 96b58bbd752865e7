package simserver

import (
	"fmt"
	"math"
	"sync"

	"github.com/colocd/colocd/predictor"
)

// Trainer is a training job running next to the server, at the
// active-thread percentage its processes were started with.
type Trainer struct {
	Profile *predictor.Profile
	Pct     int
}

// Model is colocd's predictor for one inference service, with its
// predictions cached: the server asks it once per distinct load.
type Model struct {
	Inference   *predictor.Profile
	Calibration *predictor.Calibration
	Mode        predictor.Mode
	// Requests and Seed are those of each simulation.
	Requests int
	Seed     uint64
	// SMs is the device's SM count (0: the profile's).
	SMs int

	mu    sync.Mutex
	cache map[string]predictor.Percentiles
	pr    predictor.Predictor
}

// rateStep is the rate resolution of the model: rates within it share a
// prediction.
const rateStep = 0.25

// Latency returns the predicted latency percentiles (ms, arrival to
// completion) at rate with trainers.
func (m *Model) Latency(rate float64, trainers []Trainer) (predictor.Percentiles, error) {
	rate = max(rateStep, math.Ceil(rate/rateStep)*rateStep)
	key := fmt.Sprint(rate)
	for _, t := range trainers {
		key += fmt.Sprintf("/%p:%d", t.Profile, t.Pct)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.cache[key]; ok {
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
	if m.cache == nil {
		m.cache = map[string]predictor.Percentiles{}
	}
	m.cache[key] = pred.Inference.LatencyMS
	return pred.Inference.LatencyMS, nil
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
