package admission

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
)

// fakeDevice is a GPU with settable free memory and health.
type fakeDevice struct {
	mu     sync.Mutex
	free   int
	err    error
	bad    string // unhealthy reason; "" is healthy
	memory int    // calls to FreeMemoryMiB
}

func (d *fakeDevice) FreeMemoryMiB(context.Context) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.memory++
	return d.free, d.err
}

func (d *fakeDevice) Healthy() (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bad == "", d.bad
}

// fakeDaemon is an MPS daemon with settable health.
type fakeDaemon struct{ bad string }

func (d *fakeDaemon) Healthy() (bool, string) { return d.bad == "", d.bad }

// fakeEvents records events and hands each to ch when set.
type fakeEvents struct {
	mu     sync.Mutex
	events []Event
	ch     chan Event
}

func (e *fakeEvents) Publish(_ context.Context, ev Event) error {
	e.mu.Lock()
	e.events = append(e.events, ev)
	ch := e.ch
	e.mu.Unlock()
	if ch != nil {
		ch <- ev
	}
	return nil
}

func (e *fakeEvents) all() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.events...)
}

// Small synthetic profiles: fast to simulate (a few hundred requests of four
// kernels), and a trainer whose percentage moves the service's p99.

func f64(v float64) *float64 { return &v }

func inferenceProfile(name string) *predictor.Profile {
	return syntheticProfile(name, predictor.KindInference, 1000, 4,
		predictor.Op{Name: "gemm", DurUS: 500, GapUS: 50, SM: 0.5, Occupancy: 0.5, DRAM: f64(0.3), L2: f64(0.3)})
}

func trainingProfile(name string) *predictor.Profile {
	return syntheticProfile(name, predictor.KindTraining, 2048, 5,
		predictor.Op{Name: "elementwise", DurUS: 800, GapUS: 200, SM: 1, Occupancy: 1, DRAM: f64(0.6), L2: f64(0.5)})
}

// syntheticProfile is a profile of n kernels like op on a 100-SM test GPU.
func syntheticProfile(name string, kind predictor.Kind, memoryMiB float64, n int, op predictor.Op) *predictor.Profile {
	ops := make([]predictor.Op, n)
	for i := range ops {
		ops[i] = op
	}
	return &predictor.Profile{Format: predictor.ProfileFormat, Name: name, Kind: kind,
		Device: predictor.Device{Name: "test GPU", SMs: 100}, MemoryMiB: memoryMiB, Ops: ops}
}

// testCal is the built-in time-slicing default with the presets' MPS
// placeholder coefficients.
func testCal() *predictor.Calibration {
	return predictor.DefaultCalibration().Merge(&predictor.Calibration{
		MPS: &predictor.MPSCalibration{Coefficients: map[string]float64{"dram": 0.5, "l2": 0.25, "kernels": 0.1}},
	})
}

const testRequests = 300

// newTestModel is the real model on the point estimate (confidence 0):
// most tests are about the search, leases and events, and read figures
// from the predictor directly; TestDecideHoldsUpperBound tests the bound.
func newTestModel(t testing.TB) *Model {
	t.Helper()
	m, err := NewModel(testCal(), testRequests, 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// world is what a policy reads, settable: a healthy GPU with 80,000 MiB
// free, a healthy MPS daemon, and the model.
type world struct {
	dev    *fakeDevice
	daemon *fakeDaemon
	model  *Model
}

// newWorld is the world with model m (nil: newTestModel) and testConfig's
// config, edit changing it first.
func newWorld(t testing.TB, m *Model, mode predictor.Mode, slo float64, edit func(*Config)) (world, Config) {
	t.Helper()
	if m == nil {
		m = newTestModel(t)
	}
	cfg := testConfig(mode, slo)
	if edit != nil {
		edit(&cfg)
	}
	return world{dev: &fakeDevice{free: 80000}, daemon: &fakeDaemon{}, model: m}, cfg
}

// deps are the world's dependencies: no store, no events.
func (w world) deps() Deps { return Deps{Device: w.dev, Daemon: w.daemon, Predictor: w.model} }

// harness is a controller with fakes and the real model, on the system
// clock. A test that needs time to pass runs in a synctest bubble, whose
// clock moves only while every goroutine in it waits (time.Sleep, a timer).
type harness struct {
	world
	c      *Controller
	store  *MemStore
	events *fakeEvents
}

// newHarness builds a controller; edit changes the config first.
func newHarness(t testing.TB, mode predictor.Mode, slo float64, edit func(*Config)) *harness {
	t.Helper()
	return newHarnessWith(t, nil, mode, slo, edit)
}

// newHarnessWith is newHarness with model m (nil: newTestModel).
func newHarnessWith(t testing.TB, m *Model, mode predictor.Mode, slo float64, edit func(*Config)) *harness {
	t.Helper()
	w, cfg := newWorld(t, m, mode, slo, edit)
	h := &harness{world: w, store: NewMemStore(), events: &fakeEvents{}}
	deps := w.deps()
	deps.Store, deps.Events = h.store, h.events
	c, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

// testConfig is the tests' config: bert at 100 req/s with a p99 SLO of slo
// ms, 10 % headroom, four jobs, a 2 GiB reserve and a 10 % step.
func testConfig(mode predictor.Mode, slo float64) Config {
	return Config{
		Mode:     mode,
		Services: []ServiceSpec{{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100, SLOP99MS: slo}},
		PipeDir:  "/tmp/nvidia-mps",
		Settings: Settings{
			Headroom: 0.1, MaxJobs: 4, MemoryReserveMiB: 2048, PctStep: 10,
			// Out of the way of tests about other things: the leases they
			// ask for are at most an hour. TestFirstTerm tests the default.
			Lease: LeaseTerms{FirstTerm: time.Hour},
		},
	}
}

// request returns a valid request for a small trainer; its lease token is
// testToken of its job id.
func request(id string) Request {
	return Request{RequestID: "request-id-of-at-least-22-" + id, TokenHash: sha256.Sum256([]byte(testToken("job-" + id))),
		JobID: "job-" + id, Owner: "alice", Profile: trainingProfile("resnet"),
		MemoryMiB: 4096, Processes: 2, MinPct: 10, MaxPct: 100, LeaseSeconds: 600}
}

// testToken is the lease token the launcher of job drew.
func testToken(job string) string { return "token-of-" + job }

// tokenOf is the token of a granted decision's lease.
func tokenOf(d Decision) string { return testToken(d.Lease.JobID) }

// p99At predicts bert's p99 with the predictor directly (a fresh
// predictor.Predictor, as `colocd predict` does): the reference figures.
func p99At(t testing.TB, mode predictor.Mode, svc ServiceSpec, trainers []*predictor.Profile, pcts []float64) float64 {
	t.Helper()
	sc := &predictor.Scenario{Inference: svc.Profile, Training: trainers, RateRPS: svc.RateRPS, Requests: testRequests, Seed: 1, TrainingPct: pcts}
	return predictDirectly(t, mode, sc, testCal()).Inference.LatencyMS.P99
}

// predictDirectly is the fresh predictor's prediction of sc under mode with
// cal; time slicing ignores sc.TrainingPct, so it is cleared.
func predictDirectly(t testing.TB, mode predictor.Mode, sc *predictor.Scenario, cal *predictor.Calibration) *predictor.Prediction {
	t.Helper()
	var pr predictor.Predictor
	var pred *predictor.Prediction
	var err error
	if mode == predictor.ModeMPS {
		pred, err = pr.PredictMPS(sc, cal.MPS.Params())
	} else {
		sc.TrainingPct = nil
		pred, err = pr.PredictTimeslice(sc, *cal.Timeslice)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pred
}

// bert is testConfig's service without its SLO.
func bert() ServiceSpec {
	return ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100}
}

// resnetP99 is bert's p99 under MPS beside one resnet trainer at each of
// pcts, by the predictor directly.
func resnetP99(t testing.TB, pcts ...float64) float64 {
	t.Helper()
	trainers := make([]*predictor.Profile, len(pcts))
	for i := range trainers {
		trainers[i] = trainingProfile("resnet")
	}
	return p99At(t, predictor.ModeMPS, bert(), trainers, pcts)
}

// sloJustFitting is the SLO under which a p99 of p99 just fits within
// testConfig's 10 % headroom.
func sloJustFitting(p99 float64) float64 { return p99 / 0.9 * (1 + 1e-9) }

// v100Profiles loads the committed V100 pair: the 200-kernel inference
// profile and the 870-kernel training step.
func v100Profiles(t testing.TB) (inf, train *predictor.Profile) {
	t.Helper()
	inf, err := predictor.LoadProfile("../testdata/profiles/v100-infer-200.json")
	if err != nil {
		t.Fatal(err)
	}
	train, err = predictor.LoadProfile("../testdata/profiles/v100-train-step.json")
	if err != nil {
		t.Fatal(err)
	}
	return inf, train
}

// pol is the policy a decision would be made by now (a fresh snapshot's).
func (h *harness) pol() *policy { return h.c.snapshot().pol }
