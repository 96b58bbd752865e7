package admission

import (
	"context"
	"math"
	"sync"
)

// pctGrid lists the percentages the search may grant: min, min+step, … below
// max, then max itself.
func pctGrid(min, max, step int) []int {
	var g []int
	for p := min; p < max; p += step {
		g = append(g, p)
	}
	return append(g, max)
}

// probe is the result of predicting one grid point.
type probe struct {
	fits bool // every service within its limit (exact comparisons)
	// score is the worst service's predicted p99 over its limit (fits ⇔
	// score ≤ 1, up to rounding); soloScore the same for solo p99s. Both
	// only guide the search.
	score, soloScore float64
	// throughput is each trainer's share of its solo speed (Latency's;
	// read only, it may be the cache's), nil when unknown.
	throughput []float64
}

// searchGrid returns the largest index i of the percentage grid xs for which
// eval(i) fits, or -1 if none does. Fitting must be monotone: true up to some
// index, false above it (the MPS model's p99 never rises as a trainer's
// percentage falls; docs/predictor.md).
//
// It tries the top first (a grant costs one prediction). Then it guesses
// where the p99 crosses the limit by interpolating the scores linearly in
// percent between the known bounds (below any fitting point, the service's
// solo p99 stands for 0 %), tries the grid point at or above the guess, and
// narrows: a guess within one step costs two more predictions, a deny one.
// At or above, because the model's p99 is convex in the percentage (a queue
// grows faster than its service time): the chord under the curve puts the
// crossing too low, and the point above it is more often the answer's
// neighbour. Over the test shapes (TestSearchGuessAbove) a throttle costs
// 4.74 predictions on average against 5.23 with the point below.
// After two guesses in a row that did not halve the open interval, a round
// bisects, so a badly curved p99 costs at most three rounds per halving; and
// a bound kept twice in a row has its weight halved (the Illinois rule).
// Against a plain binary search (seven predictions for a throttle on 19
// percentages) this saves two to four on the model's near-linear curves.
// With workers > 1 each round also tries the neighbours of the guess (in the
// first round: the bottom and evenly spaced points), all at once.
//
// If eval ever contradicts monotonicity, a failure wins: only indexes below
// the lowest failure count. known, when not nil, tells whether eval(i) is
// already known (a cached prediction): a round of known points runs on the
// caller's goroutine, since starting goroutines costs more than a lookup.
func searchGrid(ctx context.Context, xs []int, workers int, eval func(ctx context.Context, i int) (probe, error), known func(i int) bool) (int, error) {
	s := gridSearch{xs: xs, w: max(workers, 1), lo: -1, hi: len(xs), probes: map[int]probe{}, solo: math.NaN(), scaleLo: 1, scaleHi: 1}
	for round := 0; s.hi-s.lo > 1; round++ {
		var cand []int
		if round == 0 {
			cand = s.firstRound()
		} else {
			cand = s.nextRound()
		}
		res, err := evalAll(ctx, cand, eval, known)
		if err != nil {
			return -1, err
		}
		s.update(cand, res)
	}
	return s.lo, nil
}

// gridSearch is the state of one search.
type gridSearch struct {
	xs     []int
	w      int
	lo, hi int // xs[lo] fits (or lo = -1); xs[hi] fails (or hi = len)
	probes map[int]probe
	solo   float64 // the solo score, once known
	// guessed: this round interpolated; slow counts the guess rounds in a
	// row that did not halve the interval (at 2 the next round bisects).
	guessed bool
	slow    int
	// adjacent: the last round took a guess next to a bound after slow
	// rounds (see nextRound).
	adjacent bool
	// Illinois: a bound kept by two rounds in a row has its distance to
	// the limit halved in the interpolation, so that guesses on a curved
	// p99 stop creeping towards it from one side.
	scaleLo, scaleHi float64
	keptLo, keptHi   int
}

// firstRound is the top and, with several workers, the bottom and evenly
// spaced points between.
func (s *gridSearch) firstRound() []int {
	n := len(s.xs)
	cand := []int{n - 1}
	if s.w > 1 && n > 1 {
		cand = append(cand, 0)
		if k := min(s.w-2, n-2); k > 0 {
			for j := 1; j <= k; j++ {
				cand = append(cand, j*(n-1)/(k+1))
			}
		}
	}
	return dedupe(cand)
}

// nextRound is a guess (or the midpoint) and its nearest untried
// neighbours in (lo, hi), up to w of them.
func (s *gridSearch) nextRound() []int {
	g := (s.lo + s.hi) / 2
	// A guess right next to a bound is taken even after slow rounds: the
	// interpolation puts the crossing within one step of it, and one
	// prediction there closes the interval or moves the bound.
	// Once in a row: a curve that keeps the crossing just past a bound would
	// otherwise crawl.
	guess := s.guess()
	adjacent := s.slow >= 2 && !s.adjacent && (guess == s.lo+1 || guess == s.hi-1)
	if s.slow < 2 || adjacent {
		g, s.guessed = guess, true
	} else {
		s.slow = 0
	}
	s.adjacent = adjacent
	cand := []int{g}
	for d := 1; len(cand) < s.w && (g+d < s.hi || g-d > s.lo); d++ {
		if g+d < s.hi {
			cand = append(cand, g+d)
		}
		if len(cand) < s.w && g-d > s.lo {
			cand = append(cand, g-d)
		}
	}
	return cand
}

// guess interpolates where the score crosses 1 between the bounds and
// returns the open interval's grid index at or above it (the interval's
// last when none is).
func (s *gridSearch) guess() int {
	xLo, sLo := 0.0, s.solo
	if s.lo >= 0 {
		xLo, sLo = float64(s.xs[s.lo]), s.probes[s.lo].score
	}
	xHi, sHi := float64(s.xs[s.hi]), s.probes[s.hi].score
	if !(sHi > sLo) || math.IsNaN(sLo) || math.IsInf(sHi, 0) {
		return (s.lo + s.hi) / 2
	}
	fLo, fHi := (sLo-1)*s.scaleLo, (sHi-1)*s.scaleHi
	x := xLo + (xHi-xLo)*max(0, -fLo)/(fHi-fLo)
	g := s.lo + 1
	for g < s.hi-1 && float64(s.xs[g]) < x {
		g++
	}
	return g
}

// update records the round's results and narrows the interval.
func (s *gridSearch) update(cand []int, res []probe) {
	before, lo0, hi0 := s.hi-s.lo, s.lo, s.hi
	for k, i := range cand {
		s.probes[i] = res[k]
		if math.IsNaN(s.solo) {
			s.solo = res[k].soloScore
		}
		if !res[k].fits {
			s.hi = min(s.hi, i)
		}
	}
	s.lo = -1
	for i, p := range s.probes {
		if p.fits && i < s.hi {
			s.lo = max(s.lo, i)
		}
	}
	switch {
	case !s.guessed:
	case 2*(s.hi-s.lo) > before:
		s.slow++
	default:
		s.slow = 0
	}
	s.guessed = false
	s.keptLo, s.scaleLo = kept(s.lo == lo0, s.keptLo, s.scaleLo)
	s.keptHi, s.scaleHi = kept(s.hi == hi0, s.keptHi, s.scaleHi)
}

// kept counts the rounds in a row a bound stayed and halves its scale from
// the second on; a bound that moves starts afresh.
func kept(stayed bool, n int, scale float64) (int, float64) {
	if !stayed {
		return 0, 1
	}
	if n++; n >= 2 {
		scale /= 2
	}
	return n, scale
}

func dedupe(xs []int) []int {
	seen := map[int]bool{}
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// evalAll evaluates each index, concurrently when there are several that
// are not all known.
func evalAll(ctx context.Context, idx []int, eval func(ctx context.Context, i int) (probe, error), known func(i int) bool) ([]probe, error) {
	res := make([]probe, len(idx))
	if len(idx) == 1 || (known != nil && allKnown(idx, known)) {
		for k, i := range idx {
			p, err := eval(ctx, i)
			if err != nil {
				return nil, err
			}
			res[k] = p
		}
		return res, nil
	}
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Go(func() { res[k], errs[k] = eval(ctx, i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

func allKnown(idx []int, known func(i int) bool) bool {
	for _, i := range idx {
		if !known(i) {
			return false
		}
	}
	return true
}
