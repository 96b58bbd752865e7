package calibrate

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/colocd/colocd/predictor"
)

// scenario is the simulation of record r: its profiles, rate, and MPS
// percentages; its own requests and seed, else the fit's; sms rounds MPS
// percentages (0: from the inference profile).
func (r *Record) scenario(opts FitOptions, sms int) *predictor.Scenario {
	sc := &predictor.Scenario{Inference: r.Inference.Profile, RateRPS: r.RateRPS, Requests: opts.Requests, Seed: opts.Seed, DeviceSMs: sms}
	for _, t := range r.Training {
		sc.Training = append(sc.Training, t.Profile)
	}
	if r.Requests > 0 {
		sc.Requests = r.Requests
	}
	if r.Seed != 0 {
		sc.Seed = r.Seed
	}
	if r.Mode == predictor.ModeMPS {
		sc.InferencePct = r.InferencePct
		if len(r.Training) > 0 {
			sc.TrainingPct = []float64{r.TrainingPct}
		}
	}
	return sc
}

// recordsOf returns the records of one mode.
func (m *Measurements) recordsOf(mode predictor.Mode) []*Record {
	var out []*Record
	for i := range m.Records {
		if m.Records[i].Mode == mode {
			out = append(out, &m.Records[i])
		}
	}
	return out
}

// fitRecords readies a fit of the records of mode: it defaults opts' seed
// to 1, checks opts and returns m's records of mode (ErrNoRecords when
// there are none). Its errors start "fit <mode>", as the fit's own do.
func (m *Measurements) fitRecords(mode predictor.Mode, opts *FitOptions) ([]*Record, error) {
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if err := checkFitOptions(*opts); err != nil {
		return nil, fmt.Errorf("fit %s: %w", mode, err)
	}
	recs := m.recordsOf(mode)
	if len(recs) == 0 {
		return nil, fmt.Errorf("fit %s: %w: no record has mode %q", mode, ErrNoRecords, mode)
	}
	return recs, nil
}

// workloadGroups returns the records' indices grouped by training
// workload set, in the order of its key.
func workloadGroups(recs []*Record) [][]int {
	groups := map[string][]int{}
	for i, r := range recs {
		groups[r.workloadKey()] = append(groups[r.workloadKey()], i)
	}
	out := make([][]int, 0, len(groups))
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, groups[key])
	}
	return out
}

// heldOut reports whether a fit leaves record i out (nil: none).
type heldOut func(i int) bool

func (h heldOut) has(i int) bool { return h != nil && h(i) }

// predictRecords runs predict for records 0..n-1 but those skip holds out,
// on up to workers goroutines (0: GOMAXPROCS); each index must use its own
// Predictor. Skipped entries are nil.
func predictRecords(n, workers int, skip heldOut, predict func(i int) (*predictor.Prediction, error)) ([]*predictor.Prediction, error) {
	out := make([]*predictor.Prediction, n)
	errs := make([]error, n)
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = predict(i)
			}
		})
	}
	for i := range n {
		if !skip.has(i) {
			next <- i
		}
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}

// scoreMetrics returns the mean absolute percentage error of the
// predictions over the metrics of the records include accepts (every
// metric counts the same: the figure reported), and the weighted mean
// squared log error the search minimises (w nil: every weight 1). Metrics
// a prediction has no value for are skipped.
func scoreMetrics(metrics [][]metric, preds []*predictor.Prediction, w map[string]float64, include func(int) bool) (mape, msle float64) {
	vals := make([][]float64, len(metrics))
	for i := range metrics {
		if include(i) {
			vals[i] = predictedValues(metrics[i], preds[i])
		}
	}
	return scoreValues(metrics, vals, w, include)
}

// predictedValues is each of a record's metrics as pred predicts it (NaN:
// no value).
func predictedValues(ms []metric, pred *predictor.Prediction) []float64 {
	vs := make([]float64, len(ms))
	for j, m := range ms {
		vs[j] = m.predicted(pred)
	}
	return vs
}

// scoreValues is scoreMetrics over the predicted values of each record's
// metrics (predictedValues).
func scoreValues(metrics [][]metric, vals [][]float64, w map[string]float64, include func(int) bool) (mape, msle float64) {
	var n int
	var wsum float64
	for i, ms := range metrics {
		if !include(i) {
			continue
		}
		for j, m := range ms {
			v := vals[i][j]
			if math.IsNaN(v) {
				continue
			}
			mape += math.Abs(v-m.value) / m.value
			n++
			wt := 1.0
			if w != nil {
				wt = weightOf(w, m)
			}
			l := math.Log(v / m.value)
			msle += wt * l * l
			wsum += wt
		}
	}
	if n == 0 || wsum == 0 {
		return math.Inf(1), math.Inf(1)
	}
	return mape / float64(n), msle / wsum
}

// fitReport lists every record's measured and predicted metrics, the
// weights and seeds the fit used, and a warning when the records carry
// fewer weighted metrics than the fit has parameters.
func fitReport(recs []*Record, metrics [][]metric, preds []*predictor.Prediction, mape float64, opts FitOptions, params int) *predictor.FitReport {
	w := opts.weights()
	rep := &predictor.FitReport{Records: len(recs), MAPE: mape, Weights: maps.Clone(w), Seeds: opts.seeds()}
	weighted := 0
	for i, r := range recs {
		rf := predictor.RecordFit{Name: r.Name}
		for _, mt := range metrics[i] {
			rf.Metrics = append(rf.Metrics, predictor.MetricFit{Field: mt.field(), Measured: mt.value, Predicted: mt.predicted(preds[i])})
			rep.Metrics++
			if weightOf(w, mt) > 0 {
				weighted++
			}
		}
		rep.PerRecord = append(rep.PerRecord, rf)
	}
	if len(recs) <= params || weighted < 2*params {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d records with %d weighted metrics for %d parameters: too few to pin them (a fit can match them at many points); measure more records: several loads, trainers that do and do not idle, two trainers together",
			len(recs), weighted, params))
	}
	return rep
}

// cvScore accumulates the errors of records predicted by fits that left
// them out.
type cvScore struct {
	sum float64
	n   int
}

// add scores record i's prediction pred and records it in the report.
func (s *cvScore) add(rep *predictor.FitReport, metrics [][]metric, i int, pred *predictor.Prediction) {
	for j, mt := range metrics[i] {
		v := mt.predicted(pred)
		if math.IsNaN(v) {
			continue
		}
		rep.PerRecord[i].Metrics[j].CVPredicted = &v
		s.sum += math.Abs(v-mt.value) / mt.value
		s.n++
	}
}

// mape is the mean absolute percentage error; ok is false with no metric.
func (s *cvScore) mape() (float64, bool) {
	if s.n == 0 {
		return 0, false
	}
	return s.sum / float64(s.n), true
}
