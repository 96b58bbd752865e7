package calibrate

import (
	"math"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// blendRecords builds nine records in three folds whose measured latency
// p99 is 2 × the solo p99 times a fold-independent wobble, and a fit report
// whose held-out simulator predictions are the measurement times sim(i).
func blendRecords(sim func(i int) float64) ([][]metric, []*predictor.Prediction, *predictor.FitReport, [][]int) {
	var metrics [][]metric
	var preds []*predictor.Prediction
	rep := &predictor.FitReport{}
	folds := make([][]int, 3)
	for i := range 9 {
		solo := 5 + float64(i)
		wobble := 1 + 0.05*math.Sin(float64(3*i+1))
		meas := 2 * solo * wobble
		metrics = append(metrics, []metric{{record: i, quantity: "latency_ms", key: "p99", value: meas}})
		preds = append(preds, &predictor.Prediction{Inference: predictor.InferencePrediction{SoloLatencyMS: predictor.Percentiles{P99: solo}}})
		cv := meas * sim(i)
		rep.PerRecord = append(rep.PerRecord, predictor.RecordFit{Name: "r", Metrics: []predictor.MetricFit{{Field: "latency_ms.p99", Measured: meas, Predicted: meas, CVPredicted: &cv}}})
		folds[i%3] = append(folds[i%3], i)
	}
	return metrics, preds, rep, folds
}

// TestChooseBlendPicksNaive: a simulator 40 % high on every held-out
// record loses to the naive slowdown, whose ratio (2) the records pin
// within their 5 % wobble: the weight is 0, in every fold too.
func TestChooseBlendPicksNaive(t *testing.T) {
	t.Parallel()
	metrics, preds, rep, folds := blendRecords(func(int) float64 { return 1.4 })
	b := chooseBlend(metrics, preds, rep, folds, cvWorkload)
	if b == nil {
		t.Fatal("no blend")
	}
	if w := b.SimulatorWeight(); w != 0 {
		t.Errorf("weight %v, want 0 (the naive slowdown)", w)
	}
	for f, w := range b.FoldWeights {
		if w != 0 {
			t.Errorf("fold %d: weight %v, want 0", f, w)
		}
	}
	if r := b.NaiveRatio["latency_ms.p99"]; math.Abs(r-2) > 0.1 {
		t.Errorf("naive ratio %v, want about 2", r)
	}
	cv := b.CVMAPE
	if math.Abs(cv.Simulator-0.4) > 1e-9 || !(cv.Naive < 0.1) || cv.Blend != cv.Naive || cv.Metrics != 9 {
		t.Errorf("held out: simulator %v (want 0.4), naive %v (want < 0.1), blend %v (want the naive's), metrics %d (want 9)", cv.Simulator, cv.Naive, cv.Blend, cv.Metrics)
	}
	if len(b.Grid) != len(BlendWeights) || b.Grid[0].CVMAPE != cv.Naive || b.Grid[len(b.Grid)-1].CVMAPE != cv.Simulator {
		t.Errorf("grid %+v: want every weight, from the naive's error to the simulator's", b.Grid)
	}
	// Every metric carries its naive predictions, in-sample and held out.
	for i, r := range rep.PerRecord {
		m := r.Metrics[0]
		if m.Naive == nil || m.CVNaive == nil {
			t.Fatalf("record %d: naive %v, cv_naive %v: want both", i, m.Naive, m.CVNaive)
		}
		if want := b.NaiveRatio["latency_ms.p99"] * preds[i].Inference.SoloLatencyMS.P99; math.Abs(*m.Naive-want) > 1e-12 {
			t.Errorf("record %d: naive %v, want %v", i, *m.Naive, want)
		}
	}
	if err := (&predictor.Calibration{Format: predictor.CalibrationFormat, Timeslice: &predictor.TimesliceParams{SliceUS: 1000}, Blend: b}).Validate(); err != nil {
		t.Errorf("the blend chosen does not validate: %v", err)
	}
}

// TestChooseBlendPicksSimulator: a simulator within ±1 % of every record
// beats a naive slowdown that misses the wobble: the weight is 1.
func TestChooseBlendPicksSimulator(t *testing.T) {
	t.Parallel()
	metrics, preds, rep, folds := blendRecords(func(i int) float64 { return 1 + 0.01*float64(i%2*2-1) })
	b := chooseBlend(metrics, preds, rep, folds, cvWorkload)
	if w := b.SimulatorWeight(); w != 1 {
		t.Errorf("weight %v, want 1 (the simulator)", w)
	}
	if cv := b.CVMAPE; !(cv.Simulator < cv.Naive) || math.Abs(cv.Blend-0.01) > 1e-9 {
		t.Errorf("held out: simulator %v, naive %v, blend %v: want the simulator's 1 %% below the naive's", cv.Simulator, cv.Naive, cv.Blend)
	}
}

// TestChooseBlendMixes: a simulator whose misses mirror the naive
// slowdown's (each held-out record's measurement lies midway between the
// two) is beaten by their even blend, which is exact; and the nested error
// is scored with each fold's own weight.
func TestChooseBlendMixes(t *testing.T) {
	t.Parallel()
	metrics, preds, rep, folds := blendRecords(func(int) float64 { return 1 })
	for f, held := range folds {
		solos := make([][]float64, len(metrics))
		for i := range metrics {
			solos[i] = []float64{preds[i].Inference.SoloLatencyMS.P99}
		}
		r := naiveRatios(metrics, solos, func(i int) bool { return i%3 != f })["latency_ms.p99"]
		for _, i := range held {
			meas := metrics[i][0].value
			v := 2*meas - r*solos[i][0]
			rep.PerRecord[i].Metrics[0].CVPredicted = &v
		}
	}
	b := chooseBlend(metrics, preds, rep, folds, cvWorkload)
	if w := b.SimulatorWeight(); w != 0.5 {
		t.Errorf("weight %v, want 0.5; grid %+v", w, b.Grid)
	}
	if cv := b.CVMAPE; !(cv.Blend < 1e-12) || !(cv.Simulator > 0.01) || !(cv.Naive > 0.01) {
		t.Errorf("held out: blend %v (want 0), simulator %v, naive %v (want both above 1 %%)", cv.Blend, cv.Simulator, cv.Naive)
	}
	for f, w := range b.FoldWeights {
		if w != 0.5 {
			t.Errorf("fold %d: weight %v, want 0.5", f, w)
		}
	}
}

// TestChooseBlendNeedsFolds: with nothing held out there is no choice to
// make, and a record set of one workload is cut per record for time
// slicing only.
func TestChooseBlendNeedsFolds(t *testing.T) {
	t.Parallel()
	metrics, preds, rep, _ := blendRecords(func(int) float64 { return 1 })
	if b := chooseBlend(metrics, preds, rep, [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8}}, cvWorkload); b != nil {
		t.Errorf("one fold: blend %+v, want none", b)
	}
	p := uniformProfile("tr", predictor.KindTraining, 1, 10, 1)
	recs := []*Record{{Training: []ProfileRef{{Profile: p}}}, {Training: []ProfileRef{{Profile: p}}}}
	if g, how := cvGroups(recs, true); len(g) != 2 || how != cvRecord {
		t.Errorf("one workload, time slicing: folds %v (%s), want one per record", g, how)
	}
	if g, _ := cvGroups(recs, false); g != nil {
		t.Errorf("one workload, mps: folds %v, want none", g)
	}
}

// TestChooseBlendNested: the blend's reported error never lets a fold
// choose its own weight. The simulator is exact on two folds and 30 % high
// on the third: the other folds choose the simulator for that one, which
// then counts its full miss, so the nested error lies above the grid's best.
func TestChooseBlendNested(t *testing.T) {
	t.Parallel()
	metrics, preds, rep, folds := blendRecords(func(i int) float64 {
		if i%3 == 0 {
			return 1.3
		}
		return 1
	})
	b := chooseBlend(metrics, preds, rep, folds, cvWorkload)
	if b.FoldWeights[0] != 1 {
		t.Errorf("fold 0: weight %v, want 1 (the other folds' simulator is exact)", b.FoldWeights[0])
	}
	best := math.Inf(1)
	for _, p := range b.Grid {
		best = math.Min(best, p.CVMAPE)
	}
	if cv := b.CVMAPE; !(cv.Blend > best+0.01) {
		t.Errorf("nested blend error %v, grid's best %v: want the nested one clearly above", cv.Blend, best)
	}
}
