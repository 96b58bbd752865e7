package admission

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
	"github.com/google/go-cmp/cmp"
)

func TestModelCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newTestModel(t)
	svc := ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100, SLOP99MS: 10}
	train := trainingProfile("resnet")
	key := train.Key()
	base := []Trainer{{Profile: train, Key: key, Pct: 50}}
	first, err := m.PredictP99(ctx, []ServiceSpec{svc}, 0, base, predictor.ModeMPS)
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Misses != 1 || s.Hits != 0 {
		t.Fatalf("after one prediction: %+v", s)
	}
	tests := []struct {
		name     string
		svc      ServiceSpec
		trainers []Trainer
		mode     predictor.Mode
		hit      bool
	}{
		{"same inputs", svc, base, predictor.ModeMPS, true},
		{"same profile content, another pointer, no key", svc, []Trainer{{Profile: trainingProfile("resnet"), Pct: 50}}, predictor.ModeMPS, true},
		{"same service content, another pointer", ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100}, base, predictor.ModeMPS, true},
		{"the SLO is not an input", ServiceSpec{Name: "bert", Profile: svc.Profile, RateRPS: 100, SLOP99MS: 99}, base, predictor.ModeMPS, true},
		{"another percentage", svc, []Trainer{{Profile: train, Key: key, Pct: 60}}, predictor.ModeMPS, false},
		{"another rate", ServiceSpec{Name: "bert", Profile: svc.Profile, RateRPS: 101}, base, predictor.ModeMPS, false},
		{"another trainer", svc, []Trainer{{Profile: trainingProfile("other"), Pct: 50}}, predictor.ModeMPS, false},
		{"two trainers", svc, []Trainer{base[0], base[0]}, predictor.ModeMPS, false},
		{"no trainer", svc, nil, predictor.ModeMPS, false},
		{"time slicing", svc, base, predictor.ModeTimeslice, false},
		{"time slicing ignores percentages", svc, []Trainer{{Profile: train, Key: key, Pct: 10}}, predictor.ModeTimeslice, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := m.Stats()
			if known := m.Known([]ServiceSpec{tt.svc}, 0, tt.trainers, tt.mode); known != tt.hit {
				t.Errorf("Known = %v, want %v", known, tt.hit)
			}
			if s := m.Stats(); s != before {
				t.Errorf("Known moved the counters: %+v → %+v", before, s)
			}
			lat, err := m.PredictP99(ctx, []ServiceSpec{tt.svc}, 0, tt.trainers, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			after := m.Stats()
			if hit := after.Misses == before.Misses; hit != tt.hit {
				t.Errorf("hit %v, want %v (%+v → %+v)", hit, tt.hit, before, after)
			}
			if diff := cmp.Diff(first, lat); tt.name == "same inputs" && diff != "" {
				t.Errorf("cached prediction (-first +cached):\n%s", diff)
			}
		})
	}
	m.Purge()
	if _, err := m.PredictP99(ctx, []ServiceSpec{svc}, 0, base, predictor.ModeMPS); err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Entries != 1 {
		t.Errorf("after purge and one prediction: %+v", s)
	}
}

// besideResnet is m's figures for bert beside one resnet trainer at pct,
// under MPS.
func besideResnet(m *Model, pct int) (Latency, error) {
	return m.PredictP99(context.Background(), []ServiceSpec{bert()}, 0, []Trainer{{Profile: trainingProfile("resnet"), Pct: pct}}, predictor.ModeMPS)
}

// TestModelCachedEqualsFresh: every figure the model returns, cached or
// computed on a reused predictor, equals a fresh predictor's.
func TestModelCachedEqualsFresh(t *testing.T) {
	t.Parallel()
	m := newTestModel(t)
	for round := range 2 {
		for _, pct := range []int{100, 10, 50} {
			lat, err := besideResnet(m, pct)
			if err != nil {
				t.Fatal(err)
			}
			if want := resnetP99(t, float64(pct)); lat.P99MS != want {
				t.Errorf("round %d at %d %%: %v, fresh predictor %v", round, pct, lat.P99MS, want)
			}
		}
	}
	if s := m.Stats(); s.Misses != 3 || s.Hits != 3 {
		t.Errorf("stats %+v, want 3 misses then 3 hits", s)
	}
}

// TestModelConcurrent: concurrent callers (the parallel search) get the
// same figures as a sequential one (run with -race).
func TestModelConcurrent(t *testing.T) {
	t.Parallel()
	m := newTestModel(t)
	got := make([]Latency, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			lat, err := besideResnet(m, 10*(i+1))
			if err != nil {
				t.Error(err)
			}
			got[i] = lat
		})
	}
	wg.Wait()
	for i, lat := range got {
		if want := resnetP99(t, float64(10*(i+1))); lat.P99MS != want {
			t.Errorf("at %d %%: %v, want %v", 10*(i+1), lat.P99MS, want)
		}
	}
}

func TestModelCacheEvicts(t *testing.T) {
	t.Parallel()
	m := newTestModel(t)
	for i := range DefaultCacheEntries + 10 {
		var k [32]byte
		k[0], k[1], k[2] = byte(i), byte(i>>8), 1
		m.insert(k, []Latency{{P99MS: float64(i)}}, nil)
	}
	if s := m.Stats(); s.Entries != DefaultCacheEntries {
		t.Errorf("%d entries, want %d", s.Entries, DefaultCacheEntries)
	}
}

func TestNewModelChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cal      *predictor.Calibration
		requests int
		sms      int
	}{
		{"no calibration", nil, 0, 0},
		{"invalid calibration", &predictor.Calibration{Format: "nope"}, 0, 0},
		{"negative requests", testCal(), -1, 0},
		{"negative sms", testCal(), 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewModel(tt.cal, tt.requests, 1, tt.sms, 0); err == nil {
				t.Error("no error")
			}
		})
	}
}

// At confidence 0 the model predicts without the calibration's parameter
// intervals (nobody reads the upper end, and widening costs six
// simulations); the point estimates are the same.
func TestModelPointSkipsWidening(t *testing.T) {
	t.Parallel()
	cal := testCal()
	lo, hi := 500.0, 2000.0
	cal.Fit = &predictor.FitReport{Parameters: []predictor.ParameterFit{{Name: "slice_us", Value: 1024, Low: &lo, High: &hi, PinnedBy: predictor.PinnedByRecords}}}
	point, err := NewModel(cal, testRequests, 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	bound, err := NewModel(cal, testRequests, 1, 0, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if point.calPoint.Fit != nil || bound.calPoint.Fit == nil || cal.Fit == nil {
		t.Fatalf("calPoint fit %v / %v, calibration's %v: want none at confidence 0 only, the caller's untouched", point.calPoint.Fit, bound.calPoint.Fit, cal.Fit)
	}
	svc := []ServiceSpec{{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100}}
	tr := []Trainer{{Profile: trainingProfile("resnet"), Pct: 50}}
	a, err := point.PredictP99(context.Background(), svc, 0, tr, predictor.ModeTimeslice)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bound.PredictP99(context.Background(), svc, 0, tr, predictor.ModeTimeslice)
	if err != nil {
		t.Fatal(err)
	}
	if a.P99MS != b.P99MS || a.P99HighMS != 0 || !(b.P99HighMS > b.P99MS) {
		t.Errorf("point %+v, bound %+v: want the same p99, an upper end only with the bound", a, b)
	}
}

// A model on a MIG instance predicts what the predictor does on that
// instance, and never answers from the whole GPU's cache entries.
func TestModelOnInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := predictor.Instance{Name: "3g", SMs: 45, GPUSMs: 100, Bandwidth: 0.5}
	m, err := NewModel(testCal(), testRequests, 1, 0, 0, OnInstance(in))
	if err != nil {
		t.Fatal(err)
	}
	whole := newTestModel(t)
	svc := bert()
	train := trainingProfile("resnet")
	trainers := []Trainer{{Profile: train, Pct: 50}}
	got, err := m.PredictP99(ctx, []ServiceSpec{svc}, 0, trainers, predictor.ModeMPS)
	if err != nil {
		t.Fatal(err)
	}
	sc := &predictor.Scenario{Inference: svc.Profile, Training: []*predictor.Profile{train}, RateRPS: svc.RateRPS, Requests: testRequests, Seed: 1, TrainingPct: []float64{50}, Instance: &in}
	var pr predictor.Predictor
	pred, err := pr.PredictMPS(sc, testCal().MPS.Params())
	if err != nil {
		t.Fatal(err)
	}
	if got.P99MS != pred.Inference.LatencyMS.P99 || got.SoloP99MS != pred.Inference.SoloLatencyMS.P99 {
		t.Errorf("on the instance: p99 %v (solo %v), predictor %v (solo %v)", got.P99MS, got.SoloP99MS, pred.Inference.LatencyMS.P99, pred.Inference.SoloLatencyMS.P99)
	}
	w, err := whole.PredictP99(ctx, []ServiceSpec{svc}, 0, trainers, predictor.ModeMPS)
	if err != nil {
		t.Fatal(err)
	}
	if w.SoloP99MS >= got.SoloP99MS {
		t.Errorf("solo p99 %v ms on the whole GPU, %v on a 45-SM instance: want the instance slower", w.SoloP99MS, got.SoloP99MS)
	}
	if m.key([]ServiceSpec{svc}, trainers, predictor.ModeMPS) == whole.key([]ServiceSpec{svc}, trainers, predictor.ModeMPS) {
		t.Error("the instance is not in the cache key")
	}
}

// A prediction whose caller's deadline passes stops its simulation: a
// hostile profile (two half-microsecond kernels, the cost of seconds of
// simulation) costs its caller's wait, not the event cap; nothing is
// cached, and the next caller with time predicts afresh.
// A profile over the work budget is refused before it is simulated, and
// the refusal is kept: the same profile again is answered from the cache.
func TestModelRefusesOverBudgetOnce(t *testing.T) {
	t.Parallel()
	m := newTestModel(t)
	svc := ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 0.1, SLOP99MS: 10}
	hostile := &predictor.Profile{Format: predictor.ProfileFormat, Name: "hostile", Kind: predictor.KindTraining,
		Device: predictor.Device{Name: "test GPU", SMs: 100}, MemoryMiB: 10, Ops: []predictor.Op{
			{Name: "a", DurUS: 0.5, SM: 1, Occupancy: 1}, {Name: "b", DurUS: 0.5, SM: 1, Occupancy: 1}}}
	trainers := []Trainer{{Profile: hostile, Key: hostile.Key(), Pct: 100}}
	for try := range 2 {
		_, err := m.PredictP99(context.Background(), []ServiceSpec{svc}, 0, trainers, predictor.ModeTimeslice)
		if !errors.Is(err, predictor.ErrTooManyEvents) {
			t.Fatalf("try %d: %v, want predictor.ErrTooManyEvents", try, err)
		}
	}
	if st := m.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Errorf("stats %+v: want the second refusal from the cache", st)
	}
}

func TestModelStopsAtTheDeadline(t *testing.T) {
	t.Parallel()
	// A budget far above the estimate: the simulation starts, and would
	// run to the predictor's event cap, seconds, were it not canceled.
	m, err := NewModel(testCal(), testRequests, 1, 0, 0, WithEventBudget(1e15))
	if err != nil {
		t.Fatal(err)
	}
	svc := ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 0.01, SLOP99MS: 10}
	hostile := &predictor.Profile{Format: predictor.ProfileFormat, Name: "hostile", Kind: predictor.KindTraining,
		Device: predictor.Device{Name: "test GPU", SMs: 100}, MemoryMiB: 10, Ops: []predictor.Op{
			{Name: "a", DurUS: 0.5, SM: 1, Occupancy: 1}, {Name: "b", DurUS: 0.5, SM: 1, Occupancy: 1}}}
	trainers := []Trainer{{Profile: hostile, Key: hostile.Key(), Pct: 100}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err = m.PredictP99(ctx, []ServiceSpec{svc}, 0, trainers, predictor.ModeTimeslice)
	if !errors.Is(err, predictor.ErrCanceled) {
		t.Fatalf("a canceled prediction: %v, want predictor.ErrCanceled", err)
	}
	if m.Known([]ServiceSpec{svc}, 0, trainers, predictor.ModeTimeslice) {
		t.Error("a canceled prediction was cached")
	}
}
