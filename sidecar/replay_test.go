package sidecar

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/simserver"
)

// The guard replay: the Azure LLM inference trace's arrivals, in simulated
// time, at a simulated server whose latency is the predictor's for the
// training job that runs next to it; a launcher that asks for a slot,
// honours throttles (restarting its workers), takes raises and comes back
// after a revoke. Three policies: static (decide on the configured rate,
// no guard), reactive (the guard on the observed rate) and forecast (the
// guard on the rate forecast 30 s ahead, as colocd runs).
var (
	replayStart   = flag.Int("replay.start", 18, "first minute of the Azure trace to replay")
	replayMinutes = flag.Int("replay.minutes", 15, "minutes of the Azure trace to replay (0: to its end)")
	replayError   = flag.Float64("replay.error", 1, "the simulated server's latency over the predictor's (the predictor off by this much)")
	replaySeed    = flag.Uint64("replay.seed", 11, "seed of the simulated server's latency draws")
)

const (
	azureTrace     = "../testdata/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv"
	replaySLO      = 100.0 // ms: at the trace's mean rate a job fits at 30 %, at its peak at 10 to 20 %
	replayRate     = 5.5   // the trace's mean rate, as an inference team would configure it
	replayRequests = 1000
	restartDelay   = 20 * time.Second // a launcher's restart of its workers from a checkpoint
)

// replayResult is what one policy did.
type replayResult struct {
	minutes, overSLO int     // trace minutes replayed, and those whose p99 was over the SLO
	pctSeconds       float64 // training work: Σ over seconds of the job's running percentage
	events           map[admission.EventType]int
}

// replayObserver is the observed service as admission sees it, with or
// without the forecast (sidecar's own plannedRate and observedWindow).
type replayObserver struct {
	obs      *observe.Observer
	forecast bool
}

func (o replayObserver) ObservedRate(string) (float64, bool) {
	return plannedRate(o.obs.Observe(), o.forecast)
}
func (o replayObserver) ObservedWindow(string) (admission.ObservedWindow, bool) {
	return observedWindow(o.obs.Observe(), time.Now())
}

// inProcess hands each request to a handler: the scraper reads the
// simulated server's page as from the network, in the synctest bubble.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// replayDevice is a healthy GPU with room, and a healthy MPS daemon.
type replayDevice struct{}

func (replayDevice) FreeMemoryMiB(context.Context) (int, error) { return 100_000, nil }
func (replayDevice) Healthy() (bool, string)                    { return true, "" }

// replayEvents queues the controller's events for the launcher.
type replayEvents struct {
	mu     sync.Mutex
	queue  []admission.Event
	counts map[admission.EventType]int
}

func (e *replayEvents) Publish(_ context.Context, ev admission.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queue = append(e.queue, ev)
	e.counts[ev.Type]++
	return nil
}

func (e *replayEvents) take() []admission.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queue
	e.queue = nil
	return q
}

// launcher is a training launcher with one checkpointable job.
type launcher struct {
	c       *admission.Controller
	profile *predictor.Profile
	n       int // requests made

	lease      string
	token      string
	pct        int       // the lease's percentage the workers start at
	running    int       // the percentage the workers run at (0: stopped)
	upAt       time.Time // when stopped workers are running again
	nextAsk    time.Time
	nextRenew  time.Time
	registered int
}

func (l *launcher) step(ctx context.Context, now time.Time, events []admission.Event) error {
	for _, ev := range events {
		if ev.LeaseID != l.lease {
			continue
		}
		switch ev.Type {
		case admission.EventThrottle:
			if !ev.Deadline.IsZero() { // restart at the lower percentage
				l.pct, l.running, l.upAt = ev.Pct, 0, now.Add(restartDelay)
			} else {
				l.pct = ev.Pct
			}
		case admission.EventRaise:
			l.pct, l.running, l.upAt = ev.Pct, 0, now.Add(restartDelay)
		case admission.EventRevoke, admission.EventExpire:
			l.lease, l.running, l.nextAsk = "", 0, now.Add(time.Minute)
		}
	}
	if l.lease == "" {
		if now.Before(l.nextAsk) {
			return nil
		}
		l.n++
		token := fmt.Sprintf("token-%d", l.n)
		d, err := l.c.Decide(ctx, admission.Request{RequestID: fmt.Sprintf("replay-request-id-number-%06d", l.n), TokenHash: sha256.Sum256([]byte(token)),
			JobID: "replay", Owner: "replay", Profile: l.profile, MemoryMiB: 4096, Processes: 1, MinPct: 10, MaxPct: 100, LeaseSeconds: 300, Checkpointable: true})
		if err != nil {
			return err
		}
		if d.Lease == nil {
			l.nextAsk = now.Add(30 * time.Second)
			return nil
		}
		l.lease, l.token, l.pct, l.running, l.upAt, l.nextRenew = d.Lease.ID, token, d.Lease.Pct, 0, now.Add(restartDelay), now.Add(time.Minute)
	}
	if l.running == 0 && !now.Before(l.upAt) {
		l.registered++
		if err := l.c.Register(ctx, l.lease, l.token, []int{1000 + l.registered}); err != nil {
			return fmt.Errorf("register: %w", err)
		}
		l.running = l.pct
	}
	if !now.Before(l.nextRenew) {
		if _, err := l.c.Renew(ctx, l.lease, l.token); err != nil {
			l.lease, l.running, l.nextAsk = "", 0, now.Add(time.Minute)
			return nil
		}
		l.nextRenew = now.Add(time.Minute)
	}
	return nil
}

// replayWorld is what the three policies share: the trace slice, the
// profiles and the simulated server's latency model (its cache).
type replayWorld struct {
	arrivals []time.Duration
	inf, tr  *predictor.Profile
	trKey    predictor.ProfileKey // tr's, computed once: the model's cache key
	cal      *predictor.Calibration
	latency  *simserver.Model
}

func newReplayWorld(t testing.TB) *replayWorld {
	t.Helper()
	f, err := os.Open(azureTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := simserver.ParseTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Duration(*replayStart) * time.Minute
	to := time.Duration(math.MaxInt64)
	if *replayMinutes > 0 {
		to = from + time.Duration(*replayMinutes)*time.Minute
	}
	w := &replayWorld{}
	for _, a := range all {
		if a >= from && a < to {
			w.arrivals = append(w.arrivals, a-from)
		}
	}
	if w.inf, err = predictor.LoadProfile(serviceProfile); err != nil {
		t.Fatal(err)
	}
	if w.tr, err = predictor.LoadProfile(trainProfile); err != nil {
		t.Fatal(err)
	}
	w.trKey = w.tr.Key()
	if w.cal, err = predictor.CalibrationPreset("NVIDIA H200"); err != nil {
		t.Fatal(err)
	}
	w.latency = &simserver.Model{Inference: w.inf, Calibration: w.cal, Mode: predictor.ModeMPS, Requests: replayRequests, Seed: 1, SMs: 132}
	return w
}

// replay runs one policy over the world's trace: "static", "reactive" or
// "forecast". Call it in a synctest bubble.
func (w *replayWorld) replay(t testing.TB, policy string) replayResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	res := replayResult{events: map[admission.EventType]int{}}
	var lmu sync.Mutex
	var l *launcher
	trainers := func() []simserver.Trainer {
		lmu.Lock()
		defer lmu.Unlock()
		if l == nil || l.running == 0 {
			return nil
		}
		return []simserver.Trainer{{Profile: w.tr, Key: w.trKey, Pct: l.running}}
	}
	perMinute := map[int][]float64{}
	srv, err := simserver.New(simserver.Config{Preset: "vllm", ModelName: "chat", Arrivals: w.arrivals, Start: start, Latency: w.latency,
		Trainers: trainers, ErrorFactor: *replayError, Seed: *replaySeed,
		OnRequest: func(at time.Time, ms float64) {
			k := int(at.Sub(start) / time.Minute)
			perMinute[k] = append(perMinute[k], ms)
		}})
	if err != nil {
		t.Fatal(err)
	}
	model, err := admission.NewModel(w.cal, replayRequests, 1, 132, 0)
	if err != nil {
		t.Fatal(err)
	}
	events := &replayEvents{counts: res.events}
	deps := admission.Deps{Device: replayDevice{}, Daemon: replayDevice{}, Store: admission.NewMemStore(), Events: events, Predictor: model}
	var obs *observe.Observer
	if policy != "static" {
		vllm, err := observe.PresetNamed("vllm")
		if err != nil {
			t.Fatal(err)
		}
		obs = observe.NewObserver(&observe.Scraper{URL: "http://chat/metrics", Preset: vllm, Client: &http.Client{Transport: inProcess{srv}}},
			observe.Config{Interval: 5 * time.Second})
		deps.Observer = replayObserver{obs: obs, forecast: policy == "forecast"}
	}
	c, err := admission.New(admission.Config{Mode: predictor.ModeMPS, PipeDir: "/tmp/nvidia-mps", Settings: admission.Settings{PctStep: 10, Headroom: 0.1, MaxJobs: 1},
		Services: []admission.ServiceSpec{{Name: "chat", Profile: w.inf, RateRPS: replayRate, SLOP99MS: replaySLO}}}, deps)
	if err != nil {
		t.Fatal(err)
	}
	l = &launcher{c: c, profile: w.tr}
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	if obs != nil {
		wg.Go(func() { _ = obs.Run(ctx) })
	}
	end := start.Add(w.arrivals[len(w.arrivals)-1])
	for now := start; now.Before(end); now = time.Now() {
		if err := srv.Advance(now); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Guard(ctx); err != nil {
			t.Fatal(err)
		}
		lmu.Lock()
		res.pctSeconds += float64(l.running)
		err = l.step(ctx, now, events.take())
		lmu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait() // the scrape and the expiry loop due now go first: the same run every time
	}
	cancel()
	wg.Wait()
	keys := make([]int, 0, len(perMinute))
	for k := range perMinute {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		lat := perMinute[k]
		if len(lat) < 20 {
			continue // a partial last minute
		}
		res.minutes++
		slices.Sort(lat)
		if p99 := lat[int(math.Ceil(0.99*float64(len(lat))))-1]; p99 > replaySLO {
			res.overSLO++
		}
	}
	return res
}
