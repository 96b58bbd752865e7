package admission

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/colocd/colocd/predictor"
)

// The learned response: how a service's observed p99 answers one training
// job's MPS percentage on this GPU, learned from the guard's own windows.
// For each service, trainer profile and percentage at which that trainer
// ran alone beside the service, it keeps the ratio of the observed p99 to
// the point prediction for the same lease set and load, over the last
// responseWindows windows that did not overlap. A prediction for that
// trainer at that percentage is then the point prediction × a quantile of
// them (Guard.ResponseQuantile; 1: the largest): the server's measured answer, not the model's prior widened by
// its error interval and a correction measured at another percentage. A
// percentage not yet measured takes the larger ratio of the nearest
// measured ones around it, or of the highest measured when it is at most
// one step of the raise grid above it (safe exploration: the guard raises
// a step at a time, and the first window over the limit at the new step
// records its ratio and lowers the lease again); further above it does
// not fit until the steps below have been measured. For a trainer never
// measured the model's prior holds (Latency.held × the service's
// correction), and a new job of it starts at its min_pct while the
// service has no measurement of its own (measure first).

// responseWindows is how many windows' ratios a learned percentage keeps.
const responseWindows = 6

// ResponsePoint is what the guard learned at one percentage of one
// trainer beside one service.
type ResponsePoint struct {
	Service string `json:"service"`
	// Trainer is the trainer's profile key (hex), and Name its profile's
	// name when it was learned.
	Trainer string `json:"trainer"`
	Name    string `json:"trainer_name,omitempty"`
	Pct     int    `json:"pct"`
	// Ratios are the last windows' observed p99 over the predicted one,
	// oldest first; Ratio the one predictions use (their
	// Guard.ResponseQuantile quantile).
	Ratios []float64 `json:"ratios"`
	Ratio  float64   `json:"ratio"`
	// Windows counts every window learned from; Last is when the last
	// one ended.
	Windows int       `json:"windows"`
	Last    time.Time `json:"last"`
}

// learnKey is a learned point's trainer and percentage.
type learnKey struct {
	trainer predictor.ProfileKey
	pct     int
}

// learned is the learned response of every service, by service name. The
// controller's copy is changed under c.mu; a policy reads a clone.
type learned map[string]map[learnKey]*ResponsePoint

// observe records one window's ratio at pct of trainer beside service
// when the window did not overlap the last one learned there; the point's
// ratio is then the q-quantile of its windows (quantile). It reports
// whether the point's ratio changed.
func (l learned) observe(service string, trainer Trainer, pct int, ratio float64, win ObservedWindow, q float64) bool {
	if !(ratio > 0) || math.IsInf(ratio, 0) {
		return false
	}
	ratio = min(maxCorrection, max(1/maxCorrection, ratio))
	points := l[service]
	if points == nil {
		points = map[learnKey]*ResponsePoint{}
		l[service] = points
	}
	k := learnKey{trainer.Key, pct}
	p := points[k]
	if p == nil {
		l.makeRoom()
		p = &ResponsePoint{Service: service, Trainer: hex.EncodeToString(trainer.Key[:]), Pct: pct}
		if trainer.Profile != nil {
			p.Name = trainer.Profile.Name
		}
		points[k] = p
	}
	if win.Since.Before(p.Last) {
		return false // overlaps the window learned last
	}
	old := p.Ratio
	p.Ratios = append(p.Ratios, ratio)
	if len(p.Ratios) > responseWindows {
		p.Ratios = slices.Delete(p.Ratios, 0, len(p.Ratios)-responseWindows)
	}
	p.Ratio = quantile(p.Ratios, q)
	p.Windows++
	p.Last = win.End
	return rateBand(p.Ratio) != rateBand(old) || old == 0
}

// quantile is the q-quantile of ratios by nearest rank: the smallest
// ratio at least a share q of them do not exceed (q of 1 or more, or 0:
// the largest).
func quantile(ratios []float64, q float64) float64 {
	sorted := slices.Sorted(slices.Values(ratios))
	if q <= 0 || q >= 1 {
		return sorted[len(sorted)-1]
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// makeRoom drops the point learned longest ago when l holds
// MaxResponsePoints: a launcher that sends profile after profile cannot
// grow what the guard keeps, saves and exports without bound.
func (l learned) makeRoom() {
	n := 0
	var oldSvc string
	var oldKey learnKey
	var old *ResponsePoint
	for svc, points := range l {
		for k, p := range points {
			n++
			if old == nil || p.Last.Before(old.Last) {
				oldSvc, oldKey, old = svc, k, p
			}
		}
	}
	if n >= MaxResponsePoints && old != nil {
		delete(l[oldSvc], oldKey)
	}
}

// ratio is what a prediction for trainer at pct beside service is
// multiplied by, and whether anything learned applies (see above); step
// is how far above the highest measured percentage it may explore. A
// measurement taken before stale gives way to a newer one at most a step
// below it (the load it was taken at has gone, and the guard explores
// from what it measured since).
func (l learned) ratio(service string, trainer predictor.ProfileKey, pct, step int, stale time.Time) (float64, bool) {
	var at, below, above *ResponsePoint
	for k, p := range l[service] {
		if k.trainer != trainer {
			continue
		}
		switch {
		case k.pct == pct:
			at = p
		case k.pct < pct && (below == nil || k.pct > below.Pct):
			below = p
		case k.pct > pct && (above == nil || k.pct < above.Pct):
			above = p
		}
	}
	near := below != nil && pct-below.Pct <= step
	switch {
	case at != nil && near && at.Last.Before(stale) && below.Last.After(at.Last):
		return below.Ratio, true // explore again from a newer measurement
	case at != nil:
		return at.Ratio, true
	case above != nil && below != nil:
		return max(below.Ratio, above.Ratio), true
	case above != nil:
		return above.Ratio, true // lower than anything measured: less slowdown
	case near:
		return below.Ratio, true // one step of exploration
	case below != nil:
		return math.Inf(1), true // not explored yet: a step at a time
	}
	return 0, false
}

// has reports whether anything was learned beside service.
func (l learned) has(service string) bool { return len(l[service]) > 0 }

// hasTrainer reports whether anything was learned of trainer beside
// service.
func (l learned) hasTrainer(service string, trainer predictor.ProfileKey) bool {
	for k := range l[service] {
		if k.trainer == trainer {
			return true
		}
	}
	return false
}

// clone is a deep copy of l.
func (l learned) clone() learned {
	out := make(learned, len(l))
	for svc, points := range l {
		m := make(map[learnKey]*ResponsePoint, len(points))
		for k, p := range points {
			cp := *p
			cp.Ratios = slices.Clone(p.Ratios)
			m[k] = &cp
		}
		out[svc] = m
	}
	return out
}

// points returns every learned point, by service, trainer and percentage.
func (l learned) points() []ResponsePoint {
	var out []ResponsePoint
	for _, points := range l {
		for _, p := range points {
			cp := *p
			cp.Ratios = slices.Clone(p.Ratios)
			out = append(out, cp)
		}
	}
	slices.SortFunc(out, func(a, b ResponsePoint) int {
		return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.Trainer, b.Trainer), a.Pct-b.Pct)
	})
	return out
}

// Response returns what the guard has learned of each service's response
// to its trainers' percentages on this GPU, by service, trainer and
// percentage.
func (c *Controller) Response() []ResponsePoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.g.learned.points()
}

// MaxResponsePoints bounds the points RestoreResponse takes.
const MaxResponsePoints = 4096

// RestoreResponse takes back what an earlier run of the guard learned
// (Response, saved by its caller): a restart keeps the server's measured
// response instead of measuring it again from min_pct. Points of a service
// that is no longer configured are dropped; a point already learned by
// this run is kept. It returns how many it took, or an error naming the
// first bad point's field, with nothing taken.
func (c *Controller) RestoreResponse(points []ResponsePoint) (int, error) {
	if len(points) > MaxResponsePoints {
		return 0, fmt.Errorf("learned response: %d points, want at most %d", len(points), MaxResponsePoints)
	}
	keys := make([]learnKey, len(points))
	for i, p := range points {
		var f fields
		at := fmt.Sprintf("points[%d].", i)
		b, err := hex.DecodeString(p.Trainer)
		if err != nil || len(b) != len(keys[i].trainer) {
			f.add(at+"trainer", fmt.Sprintf("a profile key: %d hex digits", 2*len(keys[i].trainer)), strconv.Quote(p.Trainer))
		}
		copy(keys[i].trainer[:], b)
		if p.Pct < 1 || p.Pct > 100 {
			f.add(at+"pct", "a percentage from 1 to 100", strconv.Itoa(p.Pct))
		}
		if len(p.Ratios) == 0 || len(p.Ratios) > responseWindows {
			f.add(at+"ratios", fmt.Sprintf("1 to %d ratios", responseWindows), strconv.Itoa(len(p.Ratios)))
		}
		for j, r := range p.Ratios {
			if !(r >= 1/maxCorrection && r <= maxCorrection) {
				f.add(fmt.Sprintf("%sratios[%d]", at, j), fmt.Sprintf("a ratio from %g to %g", 1.0/maxCorrection, float64(maxCorrection)), fmt.Sprint(r))
			}
		}
		if p.Windows < len(p.Ratios) {
			f.add(at+"windows", fmt.Sprintf("at least its %d ratios", len(p.Ratios)), strconv.Itoa(p.Windows))
		}
		if err := f.err("learned response"); err != nil {
			return 0, err
		}
		keys[i].pct = p.Pct
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	known := map[string]bool{}
	for _, s := range c.cfg.Services {
		known[s.Name] = true
	}
	if c.g.learned == nil {
		c.g.learned = learned{}
	}
	n := 0
	for i, p := range points {
		if !known[p.Service] {
			continue
		}
		m := c.g.learned[p.Service]
		if m == nil {
			m = map[learnKey]*ResponsePoint{}
			c.g.learned[p.Service] = m
		}
		if _, ok := m[keys[i]]; ok {
			continue
		}
		cp := p
		cp.Ratios = slices.Clone(p.Ratios)
		cp.Ratio = quantile(cp.Ratios, c.cfg.Guard.ResponseQuantile)
		m[keys[i]] = &cp
		n++
	}
	if n > 0 {
		c.g.learnedGen++
	}
	return n, nil
}
