package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/predictor"
)

// gatedPredictor holds the predictions that match until the test opens the
// gate: each one that waits first announces itself on arrived. A waiting
// prediction gives up when its context ends.
type gatedPredictor struct {
	Predictor
	match   func(trainers []Trainer) bool
	gate    chan struct{} // closed: every prediction passes
	arrived chan struct{}

	mu   sync.Mutex
	seen []int // the trainer counts of the matching predictions
}

func newGate(inner Predictor, match func([]Trainer) bool) *gatedPredictor {
	return &gatedPredictor{Predictor: inner, match: match, gate: make(chan struct{}), arrived: make(chan struct{}, 64)}
}

func (p *gatedPredictor) PredictP99(ctx context.Context, svcs []ServiceSpec, i int, trainers []Trainer, mode predictor.Mode) (Latency, error) {
	if p.match(trainers) {
		p.mu.Lock()
		p.seen = append(p.seen, len(trainers))
		p.mu.Unlock()
		select {
		case <-p.gate:
		default:
			p.arrived <- struct{}{}
			select {
			case <-p.gate:
			case <-ctx.Done():
				return Latency{}, ctx.Err()
			}
		}
	}
	return p.Predictor.PredictP99(ctx, svcs, i, trainers, mode)
}

// await waits for n predictions at the gate.
func (p *gatedPredictor) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-p.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("no prediction reached the gate")
		}
	}
}

// withProfile matches the predictions with a trainer of the named profile.
func withProfile(name string) func([]Trainer) bool {
	return func(ts []Trainer) bool {
		for _, tr := range ts {
			if tr.Profile.Name == name {
				return true
			}
		}
		return false
	}
}

// within fails the test if fn does not return: how a call that waits for
// the controller's lock shows up (a timing bounds only a hang).
func within(t *testing.T, what string, fn func() error) {
	t.Helper()
	finishes(t, what, done(fn))
}

// TestLeaseCallsDoNotWaitForPredictions: while an admit's prediction is
// stuck, renew, register, status, quotes of other profiles, the lease list
// and release all answer; the admit, once its prediction ends, sees that
// the lease set changed under it and decides again.
func TestLeaseCallsDoNotWaitForPredictions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	first, second := grantTwo(t, h)
	gate := newGate(h.model, withProfile("slow"))
	h.c.deps.Predictor = gate

	slow := request("slow")
	slow.Profile = trainingProfile("slow")
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := h.c.Decide(ctx, slow)
		done <- result{d, err}
	}()
	gate.await(t, 1)

	within(t, "renew", func() error { _, err := h.c.Renew(ctx, first.Lease.ID, tokenOf(first)); return err })
	within(t, "register", func() error { return h.c.Register(ctx, first.Lease.ID, tokenOf(first), []int{4242}) })
	within(t, "status", func() error { _, err := h.c.Status(ctx); return err })
	within(t, "quote", func() error { _, err := h.c.Quote(ctx, request("other")); return err })
	within(t, "leases", func() error { h.c.Leases(); return nil })
	within(t, "release", func() error { return h.c.Release(ctx, second.Lease.ID, tokenOf(second)) })

	close(gate.gate)
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the admit never finished")
	}
	if r.err != nil || r.d.Outcome != Grant {
		t.Fatalf("admit: %s/%s (%s), %v; want a grant", r.d.Outcome, r.d.Code, r.d.Message, r.err)
	}
	if n := len(h.c.Leases()); n != 2 {
		t.Errorf("%d leases, want 2", n)
	}
	// It evaluated with both leases (three trainers), and again with the
	// one left after the release (two): the commit saw the change.
	gate.mu.Lock()
	defer gate.mu.Unlock()
	if fmt.Sprint(gate.seen) != "[3 2]" {
		t.Errorf("predicted with %v trainers, want [3 2]", gate.seen)
	}
}

// TestRacingAdmitsCommitLikeSerialOnes: two admits that both evaluate on a
// GPU with room for only one (by max_jobs, memory or SLO) end as the same
// two requests decided one after the other: the second to commit decides
// again with the first's lease.
func TestRacingAdmitsCommitLikeSerialOnes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		slo   float64
		setup func(h *harness)
	}{
		{name: "max_jobs", slo: 100, setup: func(h *harness) { h.c.cfg.MaxJobs = 1 }},
		{name: "memory", slo: 100, setup: func(h *harness) { h.dev.free = 2048 + 4096 + 1000 }},
		{name: "slo", slo: 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decideTwo := func(race bool) []string {
				h := newHarness(t, predictor.ModeMPS, tt.slo, nil)
				if tt.setup != nil {
					tt.setup(h)
				}
				reqs := []Request{request("a"), request("b")}
				out := make([]string, 2)
				if !race {
					for i, r := range reqs {
						d, err := h.c.Decide(context.Background(), r)
						out[i] = fmt.Sprintf("%s/%s/%d/%v", d.Outcome, d.Code, d.Pct, err)
					}
					return out
				}
				// Both hold at their first prediction, taken with no lease.
				gate := newGate(h.model, func(ts []Trainer) bool { return len(ts) == 1 })
				h.c.deps.Predictor = gate
				var wg sync.WaitGroup
				for i, r := range reqs {
					wg.Go(func() {
						d, err := h.c.Decide(context.Background(), r)
						out[i] = fmt.Sprintf("%s/%s/%d/%v", d.Outcome, d.Code, d.Pct, err)
					})
				}
				gate.await(t, 2)
				close(gate.gate)
				wg.Wait()
				if n := len(h.c.Leases()); n > 1 {
					t.Errorf("%d leases after racing admits, want at most 1", n)
				}
				if out[1] < out[0] {
					out[0], out[1] = out[1], out[0]
				}
				return out
			}
			serial := decideTwo(false)
			if serial[0] == serial[1] {
				t.Fatalf("the scenario admits both (%v): it tests nothing", serial)
			}
			raced := decideTwo(true)
			if serial[1] < serial[0] {
				serial[0], serial[1] = serial[1], serial[0]
			}
			if raced[0] != serial[0] || raced[1] != serial[1] {
				t.Errorf("racing: %v, one after the other: %v", raced, serial)
			}
		})
	}
}

// TestManyRacingAdmitsNeverOverAdmit: eight admits at once on a GPU that
// takes three: never more than three leases; every answer is a grant, a
// max_jobs deny or a busy 503.
func TestManyRacingAdmitsNeverOverAdmit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.MaxJobs = 3 })
	gate := newGate(h.model, func(ts []Trainer) bool { return len(ts) == 1 })
	h.c.deps.Predictor = gate
	const n = 8
	outcomes := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, err := h.c.Decide(context.Background(), request(fmt.Sprint("racer-", i)))
			switch {
			case err == nil && (d.Outcome == Grant || d.Code == CodeMaxJobs):
				outcomes[i] = string(d.Code)
			case errors.Is(err, ErrUnavailable) && d.Code == CodeBusy:
				outcomes[i] = string(d.Code)
			default:
				outcomes[i] = fmt.Sprintf("unexpected %s/%s: %v", d.Outcome, d.Code, err)
			}
		})
	}
	gate.await(t, n)
	close(gate.gate)
	wg.Wait()
	grants := 0
	for _, o := range outcomes {
		if strings.HasPrefix(o, "unexpected") {
			t.Error(o)
		}
		if o == string(CodeFits) {
			grants++
		}
	}
	if live := len(h.c.Leases()); live > 3 || live != grants {
		t.Errorf("%d leases, %d grants (%v); want at most 3, one per grant", live, grants, outcomes)
	}
}

// TestConfigChangeDuringAdmit: an SLO reload while an admit predicts on the
// old SLO makes the admit decide again on the new one.
func TestConfigChangeDuringAdmit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	gate := newGate(h.model, func(ts []Trainer) bool { return len(ts) > 0 })
	h.c.deps.Predictor = gate
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := h.c.Decide(ctx, request("r1"))
		done <- result{d, err}
	}()
	gate.await(t, 1)
	tight := []ServiceSpec{{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100, SLOP99MS: 6.9}}
	within(t, "update services", func() error { _, err := h.c.UpdateServices(ctx, tight, 0.1); return err })
	close(gate.gate)
	r := <-done
	if r.err != nil || r.d.Outcome != Deny || r.d.Code != CodeSLOViolation {
		t.Fatalf("admit across an SLO change: %s/%s (%s), %v; want the new SLO's deny", r.d.Outcome, r.d.Code, r.d.Message, r.err)
	}
	if n := len(h.c.Leases()); n != 0 {
		t.Errorf("%d leases, want 0", n)
	}
}

// churningPredictor changes the config (the same services again) during
// every prediction with a trainer, so no evaluation is ever current.
type churningPredictor struct {
	Predictor
	c     *Controller
	calls int
}

func (p *churningPredictor) PredictP99(ctx context.Context, svcs []ServiceSpec, i int, trainers []Trainer, mode predictor.Mode) (Latency, error) {
	if len(trainers) > 0 {
		p.calls++
		p.c.mu.Lock()
		p.c.changedLocked()
		p.c.mu.Unlock()
	}
	return p.Predictor.PredictP99(ctx, svcs, i, trainers, mode)
}

func TestBusyAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	churn := &churningPredictor{Predictor: h.model, c: h.c}
	h.c.deps.Predictor = churn
	d, err := h.c.Decide(context.Background(), request("r1"))
	if !errors.Is(err, ErrUnavailable) || d.Code != CodeBusy || d.Outcome != Deny {
		t.Fatalf("got %s/%s, %v; want a busy 503", d.Outcome, d.Code, err)
	}
	if want := h.c.admitAttemptsLocked(); churn.calls != want {
		t.Errorf("%d evaluations, want %d (max_jobs + 1)", churn.calls, want)
	}
	if n := len(h.c.Leases()); n != 0 {
		t.Errorf("%d leases, want 0", n)
	}
	// Once the leases stay put, the same request is granted.
	h.c.deps.Predictor = h.model
	mustDecide(t, h, request("r1"), Grant)
}

// sleepyPredictor predicts, then takes d (bubble time) more: a simulation
// that ignores its context until it is done. Its answer is good, only late.
type sleepyPredictor struct {
	Predictor
	d time.Duration
}

func (p sleepyPredictor) PredictP99(ctx context.Context, svcs []ServiceSpec, i int, trainers []Trainer, mode predictor.Mode) (Latency, error) {
	lat, err := p.Predictor.PredictP99(ctx, svcs, i, trainers, mode)
	time.Sleep(p.d)
	return lat, err
}

// TestDeadline: a decision that is not done by the caller's deadline (or
// admission.decision_timeout) is ErrTimeout and grants nothing, whether the
// deadline ends a prediction or passes while one runs; a retry with the
// same request_id is decided afresh.
func TestDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		timeout  time.Duration // the caller's; 0: none
		cap      time.Duration // admission.decision_timeout
		slowPred func(h *harness) Predictor
	}{
		{name: "the deadline ends a waiting prediction", timeout: time.Second, cap: time.Minute,
			slowPred: func(h *harness) Predictor { return newGate(h.model, func([]Trainer) bool { return true }) }},
		{name: "the deadline passes while a prediction runs", timeout: time.Second, cap: time.Minute,
			slowPred: func(h *harness) Predictor { return sleepyPredictor{h.model, 2 * time.Second} }},
		{name: "decision_timeout caps a caller without a deadline", cap: time.Second,
			slowPred: func(h *harness) Predictor { return sleepyPredictor{h.model, 2 * time.Second} }},
		{name: "decision_timeout caps a longer caller deadline", timeout: time.Hour, cap: time.Second,
			slowPred: func(h *harness) Predictor { return sleepyPredictor{h.model, 2 * time.Second} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.DecisionTimeout = tt.cap })
				h.c.deps.Predictor = tt.slowPred(h)
				ctx := context.Background()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				req := request("r1")
				d, err := h.c.Decide(ctx, req)
				if !errors.Is(err, ErrTimeout) || d.Outcome != "" {
					t.Fatalf("got %s (%s), %v; want ErrTimeout and no decision", d.Outcome, d.Message, err)
				}
				if _, err := h.c.Quote(ctx, req); !errors.Is(err, ErrTimeout) {
					t.Errorf("quote: %v, want ErrTimeout", err)
				}
				if n := len(h.c.Leases()); n != 0 {
					t.Errorf("%d leases after a timeout", n)
				}
				if s, _ := h.store.Load(context.Background()); len(s) != 0 {
					t.Errorf("%d stored leases after a timeout", len(s))
				}
				h.c.deps.Predictor = h.model
				mustDecide(t, h, req, Grant)
			})
		})
	}
}

// TestFirstTerm: a new lease lives for admission.lease.first_term (or its
// own length, when shorter); a renew or a register extends it to its full
// length. Time runs in a bubble.
func TestFirstTerm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		seconds  int                                // lease_seconds
		act      func(h *harness, d Decision) error // at 30 s
		lifetime time.Duration                      // from the grant
	}{
		{name: "nobody renews: the first term", seconds: 600, lifetime: DefaultLeaseFirstTerm},
		{name: "a shorter lease: its own length", seconds: 20, lifetime: 20 * time.Second},
		{name: "a renew: the full length", seconds: 600, lifetime: 30*time.Second + 10*time.Minute,
			act: func(h *harness, d Decision) error {
				_, err := h.c.Renew(context.Background(), d.Lease.ID, tokenOf(d))
				return err
			}},
		{name: "a register: the full length", seconds: 600, lifetime: 30*time.Second + 10*time.Minute,
			act: func(h *harness, d Decision) error {
				return h.c.Register(context.Background(), d.Lease.ID, tokenOf(d), []int{4242})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, predictor.ModeMPS, 100, func(c *Config) { c.Lease.FirstTerm = 0 }) // the default
				h.events.ch = make(chan Event, 4)
				stop := runController(t, h.c)
				defer stop()

				start := time.Now()
				req := request("r1")
				req.LeaseSeconds = tt.seconds
				d := mustDecide(t, h, req, Grant)
				if want := start.Add(min(DefaultLeaseFirstTerm, time.Duration(tt.seconds)*time.Second)); !d.Lease.ExpiresAt.Equal(want) {
					t.Errorf("granted until %s, want %s", d.Lease.ExpiresAt, want)
				}
				if tt.act != nil {
					time.Sleep(30 * time.Second)
					if err := tt.act(h, d); err != nil {
						t.Fatal(err)
					}
				}
				ev := <-h.events.ch
				if got := time.Since(start); ev.Type != EventExpire || got != tt.lifetime {
					t.Errorf("%s event after %s, want an expire after %s", ev.Type, got, tt.lifetime)
				}
				if n := len(h.c.Leases()); n != 0 {
					t.Errorf("%d leases after the expiry", n)
				}
			})
		})
	}
}

// TestTooManyEventsIsABadRequest: a profile whose simulation exceeds the
// predictor's event cap is the request's fault (400 naming profile), not
// an unhealthy predictor (503).
func TestTooManyEventsIsABadRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	h.c.deps.Predictor = capPredictor{h.model}
	for _, call := range []struct {
		name string
		fn   func(context.Context, Request) (Decision, error)
	}{{"decide", h.c.Decide}, {"quote", h.c.Quote}} {
		d, err := call.fn(context.Background(), request("r1"))
		var ve *field.List
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &ve) || ve.Errors[0].Path != "profile" || d.Outcome != "" {
			t.Errorf("%s: %s, %v; want a field.List naming profile", call.name, d.Outcome, err)
		}
	}
}

// capPredictor fails as a simulation past predictor.MaxEvents does.
type capPredictor struct{ Predictor }

func (capPredictor) PredictP99(_ context.Context, svcs []ServiceSpec, i int, _ []Trainer, _ predictor.Mode) (Latency, error) {
	return Latency{}, fmt.Errorf("predict %s: predict mps: %w", svcs[i].Name, predictor.ErrTooManyEvents)
}

// TestRacingRetriesShareOneLease: a launcher that retries (same
// request_id) while its first attempt still predicts gets the first
// attempt's lease, not a second one.
func TestRacingRetriesShareOneLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	gate := newGate(h.model, func(ts []Trainer) bool { return len(ts) == 1 })
	h.c.deps.Predictor = gate
	ds := make([]Decision, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range ds {
		wg.Go(func() { ds[i], errs[i] = h.c.Decide(context.Background(), request("r1")) })
	}
	gate.await(t, 2)
	close(gate.gate)
	wg.Wait()
	for i, d := range ds {
		if errs[i] != nil || d.Lease == nil {
			t.Fatalf("attempt %d: %s, %v; want a grant", i, d.Outcome, errs[i])
		}
	}
	if ds[0].Lease.ID != ds[1].Lease.ID {
		t.Errorf("leases %s and %s for one request_id", ds[0].Lease.ID, ds[1].Lease.ID)
	}
	if n := len(h.c.Leases()); n != 1 {
		t.Errorf("%d leases, want 1", n)
	}
}
