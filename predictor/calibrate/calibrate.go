package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/colocd/colocd/predictor"

	"gonum.org/v1/gonum/optimize"
)

// FitOptions tunes a calibration run.
type FitOptions struct {
	// Requests and Seed are each record's simulation size and arrival seed
	// unless the record sets its own (defaults: DefaultRequests, 1).
	Requests int
	Seed     uint64
	// CrossValidate adds the out-of-sample refits: leave-one-workload-out
	// (leave-one-record-out for time slicing when the records hold one
	// training workload).
	CrossValidate bool
	// MaxEvaluations bounds each Nelder–Mead run (default 300).
	MaxEvaluations int
	// Workers simulates records in parallel (default GOMAXPROCS).
	Workers int
	// Weights weight each metric in the objective, by percentile key
	// (latency and service alike) or WeightIteration (nil: DefaultWeights;
	// check with CheckWeights).
	Weights map[string]float64
	// Seeds is how many arrival seeds each record is simulated with, the
	// metrics being their mean (0: DefaultSeeds; at most MaxSeeds).
	Seeds int
	// Prior replaces DefaultTimeslicePrior; NoPrior fits the records alone.
	Prior   *TimeslicePrior
	NoPrior bool
	// Noise is the relative measurement error that sets the prior's
	// strength and the parameters' intervals' floor (0: DefaultNoise).
	Noise float64
	// NoBlend keeps the simulator alone: no blend with the naive slowdown
	// is chosen, even when the fit is cross-validated.
	NoBlend bool
}

// Bounds of the time-slicing parameters searched by the fit, in µs.
var (
	tsLower = [3]float64{10, 0.01, 0.01}
	tsUpper = [3]float64{200000, 20000, 50000}
	tsNames = [3]string{"slice_us", "switch_us", "holdover_us"}
)

// ErrNoRecords is returned when no record can be used for a fit.
var ErrNoRecords = errors.New("no usable records")

// tsObjective scores time-slicing parameters against a set of records.
type tsObjective struct {
	// cancelled is the fit context's Err: gonum calls the objective with
	// no context, and a cancelled fit must stop simulating at once.
	cancelled func() error
	recs      []*Record
	metrics   [][]metric // per record
	opts      FitOptions
	preds     []predictor.Predictor
	evals     int
	// memo keeps each record's predicted metric values (predictedValues)
	// by the parameters they were predicted at, up to memoPoints of them:
	// a refit that leaves records out searches the same grid again, and
	// the values of the records it keeps are already known. A record's
	// prediction does not depend on which others are held out.
	memo map[predictor.TimesliceParams][][]float64
	// memoCap is how many points memo holds at most (memoBytes).
	memoCap int
	// simulated counts the records predicted (each over the fit's seeds).
	simulated int
}

// memoBytes bounds the memory of tsObjective.memo, however many records a
// measurements file holds: nine records of five or six metrics keep some
// 100,000 points (a fit of the default budget evaluates some 4,000, a
// cross-validated one some 16,000), a thousand records some 900. A point
// past the cap is simulated as before.
const memoBytes = 64 << 20

func newTSObjective(ctx context.Context, recs []*Record, opts FitOptions) *tsObjective {
	o := &tsObjective{cancelled: ctx.Err, recs: recs, opts: opts, preds: make([]predictor.Predictor, len(recs)),
		memo: map[predictor.TimesliceParams][][]float64{}}
	perPoint := 96 // the map entry and the outer slice
	for i, r := range recs {
		o.metrics = append(o.metrics, r.metrics(i))
		perPoint += 24 + 8*len(o.metrics[i])
	}
	o.memoCap = memoBytes / perPoint
	return o
}

// predictAll predicts every record (in parallel) but those skip holds out.
func (o *tsObjective) predictAll(p predictor.TimesliceParams, skip heldOut) ([]*predictor.Prediction, error) {
	if err := o.cancelled(); err != nil {
		return nil, err // cancelled: every score is +Inf and the search ends fast
	}
	o.evals++
	for i := range o.recs {
		if !skip.has(i) {
			o.simulated++
		}
	}
	return predictRecords(len(o.recs), o.opts.Workers, skip, func(i int) (*predictor.Prediction, error) {
		return predictSeeds(o.opts, o.recs[i].scenario(o.opts, 0), func(sc *predictor.Scenario) (*predictor.Prediction, error) {
			return o.preds[i].PredictTimeslice(sc, p)
		})
	})
}

// score returns the mean absolute percentage error over all records but
// skip, and the mean squared log error that the search minimises: smooth
// where MAPE has kinks, and symmetric in over- and under-prediction.
func (o *tsObjective) score(p predictor.TimesliceParams, skip heldOut) (mape, msle float64) {
	vals := o.memo[p]
	if vals == nil {
		vals = make([][]float64, len(o.recs)) // nil entries: not predicted yet
		if len(o.memo) < o.memoCap {
			o.memo[p] = vals
		}
	}
	// known: the records skip holds out and those predicted at p before.
	known := heldOut(func(i int) bool { return skip.has(i) || vals[i] != nil })
	if all(len(o.recs), known) {
		if err := o.cancelled(); err != nil {
			return math.Inf(1), math.Inf(1)
		}
		o.evals++ // an evaluation all the same: Evaluations counts the search's
	} else {
		preds, err := o.predictAll(p, known)
		if err != nil {
			return math.Inf(1), math.Inf(1)
		}
		for i, pred := range preds {
			if pred != nil {
				vals[i] = predictedValues(o.metrics[i], pred)
			}
		}
	}
	return scoreValues(o.metrics, vals, o.opts.weights(), func(i int) bool { return !skip.has(i) })
}

// all reports whether h holds every index below n.
func all(n int, h heldOut) bool {
	for i := range n {
		if !h.has(i) {
			return false
		}
	}
	return true
}

// loss is what the search minimises: the records' weighted mean squared
// log error plus the prior's term.
func (o *tsObjective) loss(p predictor.TimesliceParams, skip heldOut) float64 {
	_, l := o.score(p, skip)
	return l + o.opts.prior().penalty([3]float64{p.SliceUS, p.SwitchUS, p.HoldoverUS}, o.opts.noise(), o.independent(skip))
}

// independent is how many independent errors the records but skip carry:
// one per record with a weighted metric. The metrics of one record share
// its arrivals, in the measurement and in the simulation, so their errors
// move together; counting each metric would overstate the evidence.
func (o *tsObjective) independent(skip heldOut) float64 {
	w := o.opts.weights()
	var n float64
	for i, ms := range o.metrics {
		if !skip.has(i) && slices.ContainsFunc(ms, func(m metric) bool { return weightOf(w, m) > 0 }) {
			n++
		}
	}
	return n
}

// toParams maps the optimiser's log-space vector to parameters, projected
// into the bounds; the returned penalty grows with the distance outside.
func toParams(x []float64) (predictor.TimesliceParams, float64) {
	var v [3]float64
	var pen float64
	for i := range v {
		lo, hi := math.Log(tsLower[i]), math.Log(tsUpper[i])
		xi := x[i]
		if xi < lo {
			pen += lo - xi
			xi = lo
		} else if xi > hi {
			pen += xi - hi
			xi = hi
		}
		v[i] = math.Exp(xi)
	}
	return predictor.TimesliceParams{SliceUS: v[0], SwitchUS: v[1], HoldoverUS: v[2]}, pen
}

func fromParams(p predictor.TimesliceParams) []float64 {
	return []float64{math.Log(p.SliceUS), math.Log(max(p.SwitchUS, tsLower[1])), math.Log(max(p.HoldoverUS, tsLower[2]))}
}

// minimize runs Nelder–Mead from each start, restarts it once from the best
// point with a smaller simplex (a stalled simplex often moves again), and
// polishes the result with a compass search.
func (o *tsObjective) minimize(ctx context.Context, starts [][]float64, skip heldOut) (predictor.TimesliceParams, float64, error) {
	best, bestF, err := o.nelderMead(ctx, starts, 0.5, skip)
	if err != nil {
		return best, bestF, err
	}
	return o.refine(ctx, best, bestF, skip)
}

// refine restarts Nelder–Mead from p with a small simplex and polishes
// the result: what a refit that starts near its optimum needs.
func (o *tsObjective) refine(ctx context.Context, p predictor.TimesliceParams, f float64, skip heldOut) (predictor.TimesliceParams, float64, error) {
	if q, g, err := o.nelderMead(ctx, [][]float64{fromParams(p)}, 0.1, skip); err != nil {
		return p, f, err
	} else if g < f {
		p, f = q, g
	}
	p, f = o.polish(p, f, skip)
	return p, f, nil
}

// nelderMead runs Nelder–Mead from each start with the given simplex size
// (in log units) and returns the best point.
func (o *tsObjective) nelderMead(ctx context.Context, starts [][]float64, simplex float64, skip heldOut) (predictor.TimesliceParams, float64, error) {
	best, bestF := predictor.TimesliceParams{}, math.Inf(1)
	maxEval := o.opts.MaxEvaluations
	if maxEval <= 0 {
		maxEval = 300
	}
	for _, x0 := range starts {
		if err := ctx.Err(); err != nil {
			return best, bestF, err
		}
		prob := optimize.Problem{Func: func(x []float64) float64 {
			if ctx.Err() != nil {
				return math.Inf(1)
			}
			p, pen := toParams(x)
			return o.loss(p, skip) + pen
		}}
		settings := &optimize.Settings{
			FuncEvaluations: maxEval,
			Converger:       &optimize.FunctionConverge{Absolute: 1e-6, Relative: 1e-6, Iterations: 40},
		}
		res, err := optimize.Minimize(prob, x0, settings, &optimize.NelderMead{SimplexSize: simplex})
		if err != nil && res == nil {
			return best, bestF, fmt.Errorf("nelder-mead: %w", err)
		}
		if res.F < bestF {
			bestF = res.F
			best, _ = toParams(res.X)
		}
	}
	return best, bestF, ctx.Err()
}

// polish is a compass search around p: it tries each parameter scaled by
// 1±δ for shrinking δ and keeps any improvement. Nelder–Mead can stop on
// the kinks of a piecewise-smooth error; this walks along them.
func (o *tsObjective) polish(p predictor.TimesliceParams, f float64, skip heldOut) (predictor.TimesliceParams, float64) {
	x, f := o.compass(fromParams(p), f, skip, -1, []float64{0.2, 0.1, 0.05, 0.02, 0.01, 0.005})
	p, _ = toParams(x)
	return p, f
}

// compass moves every log-space coordinate of x but fixed (-1: none) by
// 1±δ, for each δ in turn while that improves the loss f at x, staying
// inside the bounds; it returns the point and its loss.
func (o *tsObjective) compass(x []float64, f float64, skip heldOut, fixed int, deltas []float64) ([]float64, float64) {
	for _, d := range deltas {
		for improved := true; improved; {
			improved = false
			for i := range x {
				if i == fixed {
					continue
				}
				for _, step := range []float64{math.Log1p(d), -math.Log1p(d)} {
					y := slices.Clone(x)
					y[i] += step
					q, pen := toParams(y)
					if pen > 0 {
						continue
					}
					if g := o.loss(q, skip); g < f {
						x, f, improved = y, g, true
					}
				}
			}
		}
	}
	return x, f
}

// gridStarts returns up to n+1 starting points for the search. A coarse
// log-spaced grid finds the region (the error surface has flat parts where
// one start would stall); then, around its best points, a fine scan of the
// slice alone (the error can have a basin a few per cent wide in the slice,
// where records resonate with it) and a grid of switch and hold-over at
// the best slices; and the prior's centre.
func (o *tsObjective) gridStarts(n int, skip heldOut) [][]float64 {
	var cs []cand
	score := func(p predictor.TimesliceParams) {
		cs = append(cs, cand{fromParams(p), o.loss(p, skip)})
	}
	// Slice steps of 2^¼ from 128 µs to 32 ms.
	for s := 128.0; s <= 32768; s *= math.Sqrt(math.Sqrt2) {
		for _, w := range []float64{5, 20, 80, 320} {
			for _, h := range []float64{50, 150, 450, 1350, 4000} {
				score(predictor.TimesliceParams{SliceUS: s, SwitchUS: w, HoldoverUS: h})
			}
		}
	}
	sortCands(cs)
	coarse := slices.Clone(cs[:min(2, len(cs))])
	for _, c := range coarse {
		b, _ := toParams(c.x)
		// Slice steps of 2^(1/16) over two octaves each side.
		var scan []cand
		for k := -32; k <= 32; k++ {
			p := b
			p.SliceUS = b.SliceUS * math.Pow(2, float64(k)/16)
			scan = append(scan, cand{fromParams(p), o.loss(p, skip)})
		}
		sortCands(scan)
		cs = append(cs, scan...)
		for _, sc := range scan[:3] {
			s, _ := toParams(sc.x)
			for w := 5.0; w <= 1280; w *= 2 {
				for h := 25.0; h <= 6400; h *= 2 {
					score(predictor.TimesliceParams{SliceUS: s.SliceUS, SwitchUS: w, HoldoverUS: h})
				}
			}
		}
	}
	sortCands(cs)
	var out [][]float64
	for _, c := range cs {
		if len(out) == n {
			break
		}
		if !slices.ContainsFunc(out, func(x []float64) bool { return slices.Equal(x, c.x) }) {
			out = append(out, c.x)
		}
	}
	// The prior's centre is a start of its own.
	if pr := o.opts.prior(); pr != nil {
		out = append(out, fromParams(predictor.TimesliceParams{SliceUS: pr[0].Centre, SwitchUS: pr[1].Centre, HoldoverUS: pr[2].Centre}))
	}
	return out
}

// cand is a scored point of the search.
type cand struct {
	x []float64
	f float64
}

// sortCands orders candidates by score, best first.
func sortCands(cs []cand) {
	slices.SortStableFunc(cs, func(a, b cand) int {
		switch {
		case a.f < b.f:
			return -1
		case a.f > b.f:
			return 1
		}
		return 0
	})
}

// FitTimeslice fits the virtual slice, switching overhead and hold-over to
// the time-slicing records of m and reports the fit's MAPE in-sample and,
// when asked, out of sample: leave-one-workload-out when the records hold
// two training workloads or more, leave-one-record-out when they hold one.
func FitTimeslice(ctx context.Context, m *Measurements, opts FitOptions) (*predictor.Calibration, error) {
	recs, err := m.fitRecords(predictor.ModeTimeslice, &opts)
	if err != nil {
		return nil, err
	}
	obj := newTSObjective(ctx, recs, opts)
	if obj.independent(nil) == 0 {
		return nil, fmt.Errorf("fit timeslice: %w: no record measured a metric whose weight is above 0 (weights %v)", ErrNoRecords, opts.weights())
	}
	best, bestLoss, err := obj.minimize(ctx, obj.gridStarts(8, nil), nil)
	if err != nil {
		return nil, fmt.Errorf("fit timeslice: %w", err)
	}
	preds, err := obj.predictAll(best, nil)
	if err != nil {
		return nil, fmt.Errorf("fit timeslice: %w", err)
	}
	all := func(int) bool { return true }
	mape, _ := scoreMetrics(obj.metrics, preds, nil, all)
	_, msle := scoreMetrics(obj.metrics, preds, opts.weights(), all)
	rep := fitReport(recs, obj.metrics, preds, mape, opts, len(tsNames))
	rep.Prior = opts.prior().Describe()
	rep.Parameters = obj.pin(ctx, best, bestLoss, msle)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fit timeslice: %w", err)
	}
	rep.Unidentified = unidentified(rep.Parameters)
	if opts.CrossValidate && len(recs) > 1 {
		cv, how, err := obj.crossValidate(ctx, best, rep)
		if err != nil {
			return nil, fmt.Errorf("fit timeslice: cross-validate: %w", err)
		}
		if how != "" {
			rep.CVMAPE, rep.CV = &cv, how
		}
	}
	blend := cvBlend(opts, recs, obj.metrics, preds, rep, true)
	rep.Evaluations = obj.evals
	return &predictor.Calibration{
		Format:    predictor.CalibrationFormat,
		Device:    m.Device,
		Source:    fmt.Sprintf("fitted on %d time-slicing records", len(recs)),
		Timeslice: &best,
		Fit:       rep,
		Blend:     blend,
	}, nil
}

// crossValidate refits without each training workload in turn and scores
// the records left out, as a user's next trainer would be predicted; with
// one workload, without each record in turn. Leaving a workload out can
// move the optimum far (the slice that suits one trainer need not suit
// another), so its refit searches from the start, as the full fit does;
// leaving one record out moves it little, so that refit starts from the
// full fit. It fills CVPredicted in rep and says which it did ("" when it
// could not: one record).
func (o *tsObjective) crossValidate(ctx context.Context, full predictor.TimesliceParams, rep *predictor.FitReport) (float64, string, error) {
	groups, how := cvGroups(o.recs, true)
	if len(groups) < 2 {
		return 0, "", nil
	}
	refit := func(skip heldOut) (predictor.TimesliceParams, float64, error) {
		return o.minimize(ctx, o.gridStarts(8, skip), skip)
	}
	if how == cvRecord {
		refit = func(skip heldOut) (predictor.TimesliceParams, float64, error) {
			return o.refine(ctx, full, o.loss(full, skip), skip)
		}
	}
	var cv cvScore
	for _, held := range groups {
		skip := heldOut(func(i int) bool { return slices.Contains(held, i) })
		p, _, err := refit(skip)
		if err != nil {
			return 0, "", err
		}
		preds, err := o.predictAll(p, func(i int) bool { return !skip(i) })
		if err != nil {
			return 0, "", err
		}
		for _, i := range held {
			cv.add(rep, o.metrics, i, preds[i])
		}
	}
	mape, ok := cv.mape()
	if !ok {
		return 0, "", nil
	}
	return mape, how, nil
}
