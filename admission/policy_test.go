package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// The policy alone: a config, fakes of the device and the daemon, the real
// model, and views of live leases made up by the test. No controller, no
// store. Tests of the lease book (grants stored, commits, expiry) are on
// the Controller.

// policyFixture is a policy and the world it reads.
type policyFixture struct {
	world
	pol *policy
}

// newTestPolicy is the policy of testConfig (the harness's), edit changing
// the config first.
func newTestPolicy(t testing.TB, mode predictor.Mode, slo float64, edit func(*Config)) *policyFixture {
	t.Helper()
	return newTestPolicyWith(t, nil, mode, slo, edit)
}

// newTestPolicyWith is newTestPolicy with model m (nil: newTestModel).
func newTestPolicyWith(t testing.TB, m *Model, mode predictor.Mode, slo float64, edit func(*Config)) *policyFixture {
	t.Helper()
	w, cfg := newWorld(t, m, mode, slo, edit)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &policyFixture{world: w, pol: newPolicy(cfg.withDefaults(), w.deps(), slog.New(slog.DiscardHandler))}
}

// decide asks the policy about req on v (nil: no live lease, now).
func (f *policyFixture) decide(t testing.TB, req Request, v *view) (Decision, error) {
	t.Helper()
	if err := req.Validate(); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		v = &view{now: time.Now()}
	}
	return f.pol.decide(context.Background(), &req, req.profileKey(), v)
}

// mustDecide is decide that fails the test on an error or another outcome.
func (f *policyFixture) mustDecide(t testing.TB, req Request, v *view, want Outcome) Decision {
	t.Helper()
	d, err := f.decide(t, req, v)
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != want {
		t.Fatalf("%s: got %s (%s), want %s", req.RequestID, d.Outcome, d.Message, want)
	}
	return d
}

// decisionWant is what a table of decisions expects of one.
type decisionWant struct {
	outcome  Outcome
	code     ReasonCode
	pct      int    // granted percentage (grant, throttle)
	wantErr  error  // nil, or the sentinel the error matches
	predicts bool   // the decision carries predictions
	message  string // the exact sentence, and the reason of a wantErr; "": any but none
}

// check fails t where d and err (a decision and its error) are not what w
// expects.
func (w decisionWant) check(t *testing.T, d Decision, err error) {
	t.Helper()
	if w.wantErr == nil && err != nil || w.wantErr != nil && !errors.Is(err, w.wantErr) {
		t.Fatalf("error %v, want %v", err, w.wantErr)
	}
	if w.wantErr != nil && w.message != "" && err.Error() != "admission unavailable: "+w.message {
		t.Errorf("error %q, want the reason %q in it", err, w.message)
	}
	if d.Outcome != w.outcome || d.Code != w.code {
		t.Fatalf("got %s/%s (%s), want %s/%s", d.Outcome, d.Code, d.Message, w.outcome, w.code)
	}
	if d.Message == "" {
		t.Error("no message")
	}
	if w.message != "" && d.Message != w.message {
		t.Errorf("got  %q\nwant %q", d.Message, w.message)
	}
	if got := len(d.Predictions) > 0; got != w.predicts {
		t.Errorf("predictions %v, want some: %v", d.Predictions, w.predicts)
	}
	if w.outcome != Deny && d.Pct != w.pct {
		t.Errorf("granted %d %%, want %d %%", d.Pct, w.pct)
	}
}

// grantedPct is the percentage d grants, -1 for a deny.
func grantedPct(d Decision) int {
	if d.Outcome == Deny {
		return -1
	}
	return d.Pct
}

// leaseOf is req's job as a live lease at pct, granted at created with no
// PIDs registered: what a view holds after a grant.
func leaseOf(req Request, id string, pct int, created time.Time) liveLease {
	return liveLease{key: req.profileKey(), lease: Lease{
		ID: id, JobID: req.JobID, Owner: req.Owner, TokenHash: req.TokenHash, Priority: req.Priority, Weight: req.Weight,
		Pct: pct, MinPct: req.MinPct, MaxPct: max(pct, req.MaxPct), RunningPct: pct, MemoryMiB: req.memoryMiB(), Processes: req.Processes,
		Profile: req.Profile, CreatedAt: created, ExpiresAt: created.Add(time.Hour), Duration: time.Hour,
	}}
}

// viewOf is a view at now of the given co-located leases.
func viewOf(now time.Time, live ...liveLease) *view {
	return &view{now: now, live: append([]liveLease{}, live...)}
}

// The synthetic scenario's figures (bert at 100 req/s, one resnet trainer,
// 300 requests, seed 1): p99 6.95 ms at 10 %, 7.60 ms at 50 %, 8.40 ms at
// 60 %, 11.75 ms at 100 %; 18.12 ms under time slicing. The tests compute
// them with the predictor rather than trusting these comments.

// TestPolicyDecide: each outcome and reason of a decision, and the
// sentences, with figures from the predictor. The policy never makes a
// lease: a decision's Lease and Env are the controller's (TestDecideOutcomes).
func TestPolicyDecide(t *testing.T) {
	t.Parallel()
	at := func(pct float64) string { return fmtMS(resnetP99(t, pct)) }
	ts := fmtMS(p99At(t, predictor.ModeTimeslice, bert(), []*predictor.Profile{trainingProfile("resnet")}, nil))
	oneLease := func(f *policyFixture, now time.Time) *view {
		return viewOf(now, leaseOf(request("first"), "first", 100, now))
	}
	tests := []struct {
		name     string
		mode     predictor.Mode
		slo      float64
		headroom float64
		edit     func(c *Config)
		setup    func(f *policyFixture, now time.Time) *view // nil: no live lease
		req      func(r *Request)
		want     decisionWant
	}{
		{name: "grant when the SLO is loose", mode: predictor.ModeMPS, slo: 100, headroom: 0.1,
			want: decisionWant{outcome: Grant, code: CodeFits, pct: 100, predicts: true,
				message: fmt.Sprintf("predicted bert p99 %s ms stays within 90.0 ms (SLO 100 ms less 10 %% headroom) at 100 %%", at(100))}},
		{name: "grant at a max_pct below 100", mode: predictor.ModeMPS, slo: 100, headroom: 0.1, req: func(r *Request) { r.MaxPct = 70 },
			want: decisionWant{outcome: Grant, code: CodeFits, pct: 70, predicts: true}},
		{name: "throttle when only a lower pct fits", mode: predictor.ModeMPS, slo: 9, headroom: 0.1,
			want: decisionWant{outcome: Throttle, code: CodeThrottledToFit, pct: 50, predicts: true,
				message: fmt.Sprintf("throttled to 50 %% (asked up to 100 %%): at 60 %% predicted bert p99 %s ms would exceed 8.10 ms (SLO 9 ms less 10 %% headroom); at 50 %% bert p99 is %s ms", at(60), at(50))}},
		{name: "deny when even min_pct violates", mode: predictor.ModeMPS, slo: 6.9, headroom: 0.1,
			want: decisionWant{outcome: Deny, code: CodeSLOViolation, predicts: true,
				message: fmt.Sprintf("predicted bert p99 %s ms exceeds 6.21 ms (SLO 6.9 ms less 10 %% headroom) even at 10 %%", at(10))}},
		{name: "deny, no headroom", mode: predictor.ModeMPS, slo: 6.5, headroom: 0,
			want: decisionWant{outcome: Deny, code: CodeSLOViolation, predicts: true,
				message: fmt.Sprintf("predicted bert p99 %s ms exceeds SLO 6.5 ms even at 10 %%", at(10))}},
		{name: "deny when min_pct is above what fits", mode: predictor.ModeMPS, slo: 9, headroom: 0.1, req: func(r *Request) { r.MinPct = 60 },
			want: decisionWant{outcome: Deny, code: CodeSLOViolation, predicts: true}},
		{name: "deny for memory", mode: predictor.ModeMPS, slo: 100, headroom: 0.1,
			setup: func(f *policyFixture, _ time.Time) *view { f.dev.free = 2048 + 4095; return nil },
			want:  decisionWant{outcome: Deny, code: CodeInsufficientMemory}},
		{name: "memory message", mode: predictor.ModeMPS, slo: 100,
			setup: func(f *policyFixture, _ time.Time) *view { f.dev.free = 5000; return nil },
			want: decisionWant{outcome: Deny, code: CodeInsufficientMemory,
				message: "the job needs 4096 MiB of GPU memory but only 2952 MiB is available (5000 MiB free, less the 2048 MiB reserve)"}},
		{name: "memory from the profile when the request gives none", mode: predictor.ModeMPS, slo: 100, headroom: 0.1,
			setup: func(f *policyFixture, _ time.Time) *view { f.dev.free = 2048 + 2047; return nil },
			req:   func(r *Request) { r.MemoryMiB = 0 },
			want:  decisionWant{outcome: Deny, code: CodeInsufficientMemory}},
		{name: "memory with a lease not yet visible", mode: predictor.ModeMPS, slo: 100,
			setup: func(f *policyFixture, now time.Time) *view { f.dev.free = 9000; return oneLease(f, now) },
			want: decisionWant{outcome: Deny, code: CodeInsufficientMemory,
				message: "the job needs 4096 MiB of GPU memory but only 2856 MiB is available (9000 MiB free, less the 2048 MiB reserve, less 4096 MiB granted to jobs that have not started yet)"}},
		{name: "deny for max_jobs", mode: predictor.ModeMPS, slo: 100, headroom: 0.1, edit: func(c *Config) { c.MaxJobs = 1 },
			setup: oneLease,
			want: decisionWant{outcome: Deny, code: CodeMaxJobs,
				message: "the GPU already runs 1 training job, the most admission.max_jobs allows"}},
		{name: "unhealthy GPU", mode: predictor.ModeMPS, slo: 100, headroom: 0.1,
			setup: func(f *policyFixture, _ time.Time) *view {
				f.dev.bad = "XID 79: GPU has fallen off the bus"
				return nil
			},
			want: decisionWant{outcome: Deny, code: CodeGPUUnhealthy, wantErr: ErrUnavailable}},
		{name: "unreadable GPU memory", mode: predictor.ModeMPS, slo: 100, headroom: 0.1,
			setup: func(f *policyFixture, _ time.Time) *view {
				f.dev.err = errors.New("nvml: driver not loaded")
				return nil
			},
			want: decisionWant{outcome: Deny, code: CodeGPUUnhealthy, wantErr: ErrUnavailable}},
		{name: "unhealthy MPS daemon", mode: predictor.ModeMPS, slo: 100, headroom: 0.1,
			setup: func(f *policyFixture, _ time.Time) *view { f.daemon.bad = "server 4242 in FAULT"; return nil },
			want: decisionWant{outcome: Deny, code: CodeDaemonUnhealthy, wantErr: ErrUnavailable,
				message: "the MPS daemon is unhealthy: server 4242 in FAULT"}},
		{name: "time slicing ignores the MPS daemon", mode: predictor.ModeTimeslice, slo: 100, headroom: 0.1,
			setup: func(f *policyFixture, _ time.Time) *view { f.daemon.bad = "not running"; return nil },
			want:  decisionWant{outcome: Grant, code: CodeFits, pct: 100, predicts: true}},
		{name: "time slicing grants at 100 whatever max_pct", mode: predictor.ModeTimeslice, slo: 100, headroom: 0.1, req: func(r *Request) { r.MaxPct = 40 },
			want: decisionWant{outcome: Grant, code: CodeFits, pct: 100, predicts: true}},
		{name: "time slicing grant", mode: predictor.ModeTimeslice, slo: 25, headroom: 0.2,
			want: decisionWant{outcome: Grant, code: CodeFits, pct: 100, predicts: true,
				message: fmt.Sprintf("under time slicing, predicted bert p99 %s ms stays within 20.0 ms (SLO 25 ms less 20 %% headroom)", ts)}},
		{name: "time slicing denies what does not fit", mode: predictor.ModeTimeslice, slo: 15, headroom: 0.1,
			want: decisionWant{outcome: Deny, code: CodeTimesliceNoFit, predicts: true}},
		{name: "time slicing deny", mode: predictor.ModeTimeslice, slo: 15, headroom: 0,
			want: decisionWant{outcome: Deny, code: CodeTimesliceNoFit, predicts: true,
				message: fmt.Sprintf("under time slicing, predicted bert p99 %s ms exceeds SLO 15 ms", ts)}},
		{name: "predictor failure", mode: predictor.ModeMPS, slo: 100, headroom: 0.1,
			setup: func(f *policyFixture, _ time.Time) *view { f.pol.predictor = failingPredictor{}; return nil },
			want:  decisionWant{outcome: Deny, code: CodePredictorUnhealthy, wantErr: ErrUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestPolicy(t, tt.mode, tt.slo, func(c *Config) {
				c.Headroom = tt.headroom
				if tt.edit != nil {
					tt.edit(c)
				}
			})
			var v *view
			if tt.setup != nil {
				v = tt.setup(f, time.Now())
			}
			req := request("r1")
			if tt.req != nil {
				tt.req(&req)
			}
			d, err := f.decide(t, req, v)
			tt.want.check(t, d, err)
			if d.Lease != nil || d.Env != nil {
				t.Errorf("the policy made lease %v, env %v", d.Lease, d.Env)
			}
		})
	}
}

// TestPolicyPredictsAsThePredictor: a decision's predicted and solo p99 are
// exactly what the predictor (and so `colocd predict`) gives for the same
// profiles, rate, requests, seed and calibration, with the live leases as
// trainers, oldest first, then the candidate — on the committed V100
// profiles, under both modes.
func TestPolicyPredictsAsThePredictor(t *testing.T) {
	t.Parallel()
	inf, train := v100Profiles(t)
	small := trainingProfile("small") // a second, different trainer
	small.Device = train.Device
	const requests, seed, rate = 200, 7, 8.0
	cal := testCal()
	for _, mode := range []predictor.Mode{predictor.ModeMPS, predictor.ModeTimeslice} {
		t.Run(string(mode), func(t *testing.T) {
			model, err := NewModel(cal, requests, seed, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			svc := ServiceSpec{Name: "v100", Profile: inf, RateRPS: rate, SLOP99MS: 1000}
			f := newTestPolicyWith(t, model, mode, 1000, func(c *Config) { c.Services = []ServiceSpec{svc} })
			now := time.Now()
			first := request("first")
			first.Profile, first.MaxPct = small, 40
			firstPct := grantedPct(f.mustDecide(t, first, nil, Grant))
			second := request("second")
			second.Profile, second.MaxPct = train, 70
			d := f.mustDecide(t, second, viewOf(now, leaseOf(first, "first", firstPct, now)), Grant)

			sc := &predictor.Scenario{Inference: inf, Training: []*predictor.Profile{small, train}, RateRPS: rate,
				Requests: requests, Seed: seed, TrainingPct: []float64{40, 70}, DeviceSMs: cal.Device.SMs}
			want := predictDirectly(t, mode, sc, cal)
			got := d.Predictions[0]
			if got.PredictedP99MS != want.Inference.LatencyMS.P99 || got.SoloP99MS != want.Inference.SoloLatencyMS.P99 {
				t.Errorf("decision p99 %v solo %v; predictor %v solo %v", got.PredictedP99MS, got.SoloP99MS,
					want.Inference.LatencyMS.P99, want.Inference.SoloLatencyMS.P99)
			}
			if got.SLOP99MS != 1000 || got.Service != "v100" {
				t.Errorf("prediction %+v", got)
			}
		})
	}
}

// A job of lower priority is throttled before a newer one of higher
// priority; among equals the newest goes first (TestUpdateServices).
func TestPolicyReplanTakesLowestPriorityFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	slo := sloJustFitting(resnetP99(t, 50, 100))
	synctest.Test(t, func(t *testing.T) {
		f := newTestPolicy(t, predictor.ModeMPS, slo, nil)
		now := time.Now()
		low, high := request("low"), request("high")
		low.Priority, high.Priority = -1, 5
		live := []liveLease{leaseOf(low, "low", 100, now.Add(-time.Second)), leaseOf(high, "high", 100, now)}
		p, err := f.pol.replan(ctx, live)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.pcts, []int{50, 100}) || slices.Contains(p.revoked, true) {
			t.Fatalf("plan %+v, want the older, lower-priority lease throttled to 50 %%", p)
		}
	})
}
