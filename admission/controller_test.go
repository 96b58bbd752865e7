package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// The synthetic scenario's figures (bert at 100 req/s, one resnet trainer,
// 300 requests, seed 1): p99 6.95 ms at 10 %, 7.60 ms at 50 %, 8.40 ms at
// 60 %, 11.75 ms at 100 %; 18.12 ms under time slicing. The tests compute
// them with the predictor rather than trusting these comments.

func TestDecideOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		mode     predictor.Mode
		slo      float64
		setup    func(t *testing.T, h *harness)
		req      func(r *Request)
		outcome  Outcome
		code     ReasonCode
		pct      int   // granted percentage (grant, throttle)
		wantErr  error // nil, or the sentinel the error matches
		predicts bool  // the decision carries predictions
	}{
		{name: "grant when the SLO is loose", mode: predictor.ModeMPS, slo: 100,
			outcome: Grant, code: CodeFits, pct: 100, predicts: true},
		{name: "grant at a max_pct below 100", mode: predictor.ModeMPS, slo: 100, req: func(r *Request) { r.MaxPct = 70 },
			outcome: Grant, code: CodeFits, pct: 70, predicts: true},
		{name: "throttle when only a lower pct fits", mode: predictor.ModeMPS, slo: 9,
			outcome: Throttle, code: CodeThrottledToFit, pct: 50, predicts: true},
		{name: "deny when even min_pct violates", mode: predictor.ModeMPS, slo: 6.9,
			outcome: Deny, code: CodeSLOViolation, predicts: true},
		{name: "deny when min_pct is above what fits", mode: predictor.ModeMPS, slo: 9, req: func(r *Request) { r.MinPct = 60 },
			outcome: Deny, code: CodeSLOViolation, predicts: true},
		{name: "deny for memory", mode: predictor.ModeMPS, slo: 100,
			setup:   func(t *testing.T, h *harness) { h.dev.free = 2048 + 4095 },
			outcome: Deny, code: CodeInsufficientMemory},
		{name: "memory from the profile when the request gives none", mode: predictor.ModeMPS, slo: 100,
			setup:   func(t *testing.T, h *harness) { h.dev.free = 2048 + 2047 },
			req:     func(r *Request) { r.MemoryMiB = 0 },
			outcome: Deny, code: CodeInsufficientMemory},
		{name: "deny for max_jobs", mode: predictor.ModeMPS, slo: 100,
			setup: func(t *testing.T, h *harness) {
				h.c.cfg.MaxJobs = 1
				mustDecide(t, h, request("first"), Grant)
			},
			outcome: Deny, code: CodeMaxJobs},
		{name: "unhealthy GPU", mode: predictor.ModeMPS, slo: 100,
			setup:   func(t *testing.T, h *harness) { h.dev.bad = "XID 79: GPU has fallen off the bus" },
			outcome: Deny, code: CodeGPUUnhealthy, wantErr: ErrUnavailable},
		{name: "unreadable GPU memory", mode: predictor.ModeMPS, slo: 100,
			setup:   func(t *testing.T, h *harness) { h.dev.err = errors.New("nvml: driver not loaded") },
			outcome: Deny, code: CodeGPUUnhealthy, wantErr: ErrUnavailable},
		{name: "unhealthy MPS daemon", mode: predictor.ModeMPS, slo: 100,
			setup:   func(t *testing.T, h *harness) { h.daemon.bad = "server 4242 in FAULT" },
			outcome: Deny, code: CodeDaemonUnhealthy, wantErr: ErrUnavailable},
		{name: "time slicing ignores the MPS daemon", mode: predictor.ModeTimeslice, slo: 100,
			setup:   func(t *testing.T, h *harness) { h.daemon.bad = "not running" },
			outcome: Grant, code: CodeFits, pct: 100, predicts: true},
		{name: "time slicing grants at 100 whatever max_pct", mode: predictor.ModeTimeslice, slo: 100, req: func(r *Request) { r.MaxPct = 40 },
			outcome: Grant, code: CodeFits, pct: 100, predicts: true},
		{name: "time slicing denies what does not fit", mode: predictor.ModeTimeslice, slo: 15,
			outcome: Deny, code: CodeTimesliceNoFit, predicts: true},
		{name: "predictor failure", mode: predictor.ModeMPS, slo: 100,
			setup:   func(t *testing.T, h *harness) { h.c.deps.Predictor = failingPredictor{} },
			outcome: Deny, code: CodePredictorUnhealthy, wantErr: ErrUnavailable},
		{name: "store failure", mode: predictor.ModeMPS, slo: 100,
			setup:   func(t *testing.T, h *harness) { h.c.deps.Store = failingStore{h.store} },
			outcome: Deny, code: CodeStoreUnavailable, wantErr: ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.mode, tt.slo, nil)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			req := request("r1")
			if tt.req != nil {
				tt.req(&req)
			}
			d, err := h.c.Decide(context.Background(), req)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if d.Outcome != tt.outcome || d.Code != tt.code {
				t.Fatalf("got %s/%s (%s), want %s/%s", d.Outcome, d.Code, d.Message, tt.outcome, tt.code)
			}
			if d.Message == "" {
				t.Error("no message")
			}
			if got := len(d.Predictions) > 0; got != tt.predicts {
				t.Errorf("predictions %v, want some: %v", d.Predictions, tt.predicts)
			}
			if tt.outcome == Deny {
				if d.Lease != nil || d.Env != nil {
					t.Errorf("a deny with lease %v, token %q", d.Lease, tokenOf(d))
				}
				return
			}
			if d.Lease == nil || d.Lease.Pct != tt.pct {
				t.Fatalf("lease %+v, want one at %d %%", d.Lease, tt.pct)
			}
			stored, _ := h.store.Load(context.Background())
			if len(stored) != len(h.c.Leases()) || stored[len(stored)-1].Revision == 0 {
				t.Errorf("stored %d leases, controller has %d", len(stored), len(h.c.Leases()))
			}
		})
	}
}

func mustDecide(t testing.TB, h *harness, req Request, want Outcome) Decision {
	t.Helper()
	d, err := h.c.Decide(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != want {
		t.Fatalf("%s: got %s (%s), want %s", req.RequestID, d.Outcome, d.Message, want)
	}
	return d
}

type failingPredictor struct{}

func (failingPredictor) PredictP99(context.Context, []ServiceSpec, int, []Trainer, predictor.Mode) (Latency, error) {
	return Latency{}, errors.New("simulation blew up")
}

// failingStore fails Save (embedding the rest).
type failingStore struct{ Store }

func (failingStore) Save(context.Context, *Lease) error { return errors.New("nats: no responders") }

// TestDecisionMessages pins the sentences, with figures from the predictor.
func TestDecisionMessages(t *testing.T) {
	svc := ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100}
	at := func(pct float64) string {
		return fmtMS(p99At(t, predictor.ModeMPS, svc, []*predictor.Profile{trainingProfile("resnet")}, []float64{pct}))
	}
	ts := fmtMS(p99At(t, predictor.ModeTimeslice, svc, []*predictor.Profile{trainingProfile("resnet")}, nil))
	tests := []struct {
		name     string
		mode     predictor.Mode
		slo      float64
		headroom float64
		setup    func(h *harness)
		want     string
	}{
		{name: "grant", mode: predictor.ModeMPS, slo: 100, headroom: 0.1,
			want: fmt.Sprintf("predicted bert p99 %s ms stays within 90.0 ms (SLO 100 ms less 10 %% headroom) at 100 %%", at(100))},
		{name: "throttle", mode: predictor.ModeMPS, slo: 9, headroom: 0.1,
			want: fmt.Sprintf("throttled to 50 %% (asked up to 100 %%): at 60 %% predicted bert p99 %s ms would exceed 8.10 ms (SLO 9 ms less 10 %% headroom); at 50 %% bert p99 is %s ms", at(60), at(50))},
		{name: "deny, with headroom", mode: predictor.ModeMPS, slo: 6.9, headroom: 0.1,
			want: fmt.Sprintf("predicted bert p99 %s ms exceeds 6.21 ms (SLO 6.9 ms less 10 %% headroom) even at 10 %%", at(10))},
		{name: "deny, no headroom", mode: predictor.ModeMPS, slo: 6.5, headroom: 0,
			want: fmt.Sprintf("predicted bert p99 %s ms exceeds SLO 6.5 ms even at 10 %%", at(10))},
		{name: "time slicing deny", mode: predictor.ModeTimeslice, slo: 15, headroom: 0,
			want: fmt.Sprintf("under time slicing, predicted bert p99 %s ms exceeds SLO 15 ms", ts)},
		{name: "time slicing grant", mode: predictor.ModeTimeslice, slo: 25, headroom: 0.2,
			want: fmt.Sprintf("under time slicing, predicted bert p99 %s ms stays within 20.0 ms (SLO 25 ms less 20 %% headroom)", ts)},
		{name: "memory", mode: predictor.ModeMPS, slo: 100, setup: func(h *harness) { h.dev.free = 5000 },
			want: "the job needs 4096 MiB of GPU memory but only 2952 MiB is available (5000 MiB free, less the 2048 MiB reserve)"},
		{name: "memory with a lease not yet visible", mode: predictor.ModeMPS, slo: 100,
			setup: func(h *harness) {
				mustDecide(t, h, request("first"), Grant)
				h.dev.free = 9000
			},
			want: "the job needs 4096 MiB of GPU memory but only 2856 MiB is available (9000 MiB free, less the 2048 MiB reserve, less 4096 MiB granted to jobs that have not started yet)"},
		{name: "max jobs", mode: predictor.ModeMPS, slo: 100,
			setup: func(h *harness) {
				h.c.cfg.MaxJobs = 1
				mustDecide(t, h, request("first"), Grant)
			},
			want: "the GPU already runs 1 training job, the most admission.max_jobs allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.mode, tt.slo, func(c *Config) { c.Headroom = tt.headroom })
			if tt.setup != nil {
				tt.setup(h)
			}
			d, err := h.c.Decide(context.Background(), request("r1"))
			if err != nil {
				t.Fatal(err)
			}
			if d.Message != tt.want {
				t.Errorf("got  %q\nwant %q", d.Message, tt.want)
			}
		})
	}
}

// TestUnavailableMessages: the reason reaches both the error (503) and the
// decision's sentence.
func TestUnavailableMessages(t *testing.T) {
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	h.daemon.bad = "server 4242 in FAULT"
	d, err := h.c.Decide(context.Background(), request("r1"))
	want := "the MPS daemon is unhealthy: server 4242 in FAULT"
	if d.Message != want || err == nil || err.Error() != "admission unavailable: "+want {
		t.Errorf("got %q, %v; want %q", d.Message, err, want)
	}
	// Not remembered: once healthy, the same request_id is decided afresh.
	h.daemon.bad = ""
	mustDecide(t, h, request("r1"), Grant)
}

// TestPredictedP99EqualsPredictor: a decision's predicted and solo p99 are
// exactly what the predictor (and so `colocd predict`) gives for the same
// profiles, rate, requests, seed and calibration, with the live leases as
// trainers, oldest first, then the candidate — on the committed V100
// profiles, under both modes.
func TestPredictedP99EqualsPredictor(t *testing.T) {
	inf, err := predictor.LoadProfile("../testdata/profiles/v100-infer-200.json")
	if err != nil {
		t.Fatal(err)
	}
	train, err := predictor.LoadProfile("../testdata/profiles/v100-train-step.json")
	if err != nil {
		t.Fatal(err)
	}
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
			h := newHarness(t, mode, 1000, func(c *Config) { c.Services = []ServiceSpec{svc} })
			h.c.deps.Predictor = model
			first := request("first")
			first.Profile, first.MaxPct = small, 40
			mustDecide(t, h, first, Grant)
			second := request("second")
			second.Profile, second.MaxPct = train, 70
			d := mustDecide(t, h, second, Grant)

			sc := &predictor.Scenario{Inference: inf, Training: []*predictor.Profile{small, train}, RateRPS: rate,
				Requests: requests, Seed: seed, TrainingPct: []float64{40, 70}, DeviceSMs: cal.Device.SMs}
			var pr predictor.Predictor
			var want *predictor.Prediction
			if mode == predictor.ModeMPS {
				want, err = pr.PredictMPS(sc, cal.MPS.Params())
			} else {
				sc.TrainingPct = nil
				want, err = pr.PredictTimeslice(sc, *cal.Timeslice)
			}
			if err != nil {
				t.Fatal(err)
			}
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

func TestQuoteHasNoEffects(t *testing.T) {
	h := newHarness(t, predictor.ModeMPS, 9, func(c *Config) { c.MaxJobs = 1 })
	for range 3 {
		d, err := h.c.Quote(context.Background(), request("r1"))
		if err != nil {
			t.Fatal(err)
		}
		if d.Outcome != Throttle || d.Lease != nil || d.Env != nil {
			t.Fatalf("quote %+v", d)
		}
	}
	if n := len(h.c.Leases()); n != 0 {
		t.Fatalf("%d leases after quotes", n)
	}
	// Not remembered either: a Decide with the same id and other content is fine.
	other := request("r1")
	other.MaxPct = 50
	mustDecide(t, h, other, Grant)
}

// TestGivenProfileKey: a request that brings Profile.Key() decides as one
// that does not, from the same cached predictions.
func TestGivenProfileKey(t *testing.T) {
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	plain, err := h.c.Quote(context.Background(), request("r1"))
	if err != nil {
		t.Fatal(err)
	}
	misses := h.model.Stats().Misses
	keyed := request("r1")
	keyed.ProfileKey = keyed.Profile.Key()
	got, err := h.c.Quote(context.Background(), keyed)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != plain.Outcome || got.Pct != plain.Pct || got.Message != plain.Message {
		t.Errorf("with the key: %+v, without: %+v", got, plain)
	}
	if m := h.model.Stats().Misses; m != misses {
		t.Errorf("%d new simulations with the key, want none", m-misses)
	}
}

// TestDecideCancelled: a cancelled context ends the decision with its error
// and no lease.
func TestDecideCancelled(t *testing.T) {
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := h.c.Decide(ctx, request("r1"))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) || d.Lease != nil || len(h.c.Leases()) != 0 {
		t.Fatalf("got %+v, %v", d, err)
	}
	mustDecide(t, h, request("r1"), Throttle) // not remembered
}

func TestDecideInvalid(t *testing.T) {
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	req := request("r1")
	req.MinPct = 0
	_, err := h.c.Decide(context.Background(), req)
	var ve *ValidationError
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &ve) || ve.Errors[0].Path != "compute.min_pct" {
		t.Fatalf("got %v", err)
	}
}

// TestProfileValidatedUnlessVouched: a request without its profile's key
// has the profile validated, field by field, even after the same profile
// name passed before; one that brings the key was validated at the edge.
func TestProfileValidatedUnlessVouched(t *testing.T) {
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	ctx := context.Background()
	if _, err := h.c.Quote(ctx, request("r1")); err != nil {
		t.Fatal(err)
	}
	bad := request("r2")
	bad.Profile = trainingProfile("resnet")
	bad.Profile.Ops[1].DurUS = -5 // same name, one op broken
	_, err := h.c.Quote(ctx, bad)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Errors[0].Path != "profile.ops[1].dur_us" {
		t.Fatalf("a broken profile after a valid one of the same name: %v", err)
	}
	vouched := request("r3")
	vouched.ProfileKey = vouched.Profile.Key()
	vouched.MinPct = 0 // the request's own fields are still checked
	if _, err := h.c.Quote(ctx, vouched); !errors.As(err, &ve) || ve.Errors[0].Path != "compute.min_pct" {
		t.Fatalf("a vouched profile with a bad min_pct: %v", err)
	}
}

func TestEnv(t *testing.T) {
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	d := mustDecide(t, h, request("r1"), Throttle)
	want := map[string]string{
		"COLOCD_LEASE_ID":                   d.Lease.ID,
		"CUDA_MPS_PIPE_DIRECTORY":           "/tmp/nvidia-mps",
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=4096M",
		"CUDA_MPS_CLIENT_PRIORITY":          "1",
	}
	if fmt.Sprint(d.Env) != fmt.Sprint(want) {
		t.Errorf("env %v, want %v", d.Env, want)
	}
	h = newHarness(t, predictor.ModeTimeslice, 100, nil)
	if d := mustDecide(t, h, request("r1"), Grant); len(d.Env) != 1 || d.Env["COLOCD_LEASE_ID"] != d.Lease.ID {
		t.Errorf("time slicing env %v, want only the lease's id", d.Env)
	}
	// On a MIG device the job sees that device alone, in either mode.
	const mig = "MIG-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40"
	for _, mode := range []predictor.Mode{predictor.ModeMPS, predictor.ModeTimeslice} {
		h = newHarness(t, mode, 100, func(c *Config) { c.VisibleDevice = mig })
		if d := mustDecide(t, h, request("r1"), Grant); d.Env["CUDA_VISIBLE_DEVICES"] != mig || d.Env["COLOCD_LEASE_ID"] != d.Lease.ID {
			t.Errorf("%s on a MIG device: env %v, want CUDA_VISIBLE_DEVICES=%s", mode, d.Env, mig)
		}
	}
}

func TestNewChecksConfig(t *testing.T) {
	good := func() (Config, Deps) {
		return Config{Mode: predictor.ModeMPS, PipeDir: "/tmp/mps",
				Services: []ServiceSpec{{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 10, SLOP99MS: 15}}},
			Deps{Device: &fakeDevice{}, Daemon: &fakeDaemon{}, Store: NewMemStore(), Events: &fakeEvents{}, Predictor: failingPredictor{}}
	}
	tests := []struct {
		name  string
		edit  func(*Config, *Deps)
		field string // a field the error names; "" for no error
	}{
		{"defaults fill the rest", func(*Config, *Deps) {}, ""},
		{"mode", func(c *Config, _ *Deps) { c.Mode = "mig" }, "mode"},
		{"pipe dir in mps mode", func(c *Config, _ *Deps) { c.PipeDir = "" }, "pipe_dir"},
		{"headroom", func(c *Config, _ *Deps) { c.Headroom = 1 }, "headroom"},
		{"no services", func(c *Config, _ *Deps) { c.Services = nil }, "services"},
		{"duplicate service", func(c *Config, _ *Deps) { c.Services = append(c.Services, c.Services[0]) }, "services[1].name"},
		{"training profile as a service", func(c *Config, _ *Deps) { c.Services[0].Profile = trainingProfile("x") }, "services[0].profile.kind"},
		{"slo", func(c *Config, _ *Deps) { c.Services[0].SLOP99MS = 0 }, "services[0].slo.p99_ms"},
		{"pct step", func(c *Config, _ *Deps) { c.PctStep = 101 }, "pct_step"},
		{"lease default above max", func(c *Config, _ *Deps) { c.LeaseDefault = 2 * DefaultLeaseMax }, "lease.default"},
		{"negative reserve", func(c *Config, _ *Deps) { c.MemoryReserveMiB = -1 }, "memory_reserve_mib"},
		{"no daemon in mps mode", func(_ *Config, d *Deps) { d.Daemon = nil }, "Daemon"},
		{"no daemon needed for time slicing", func(c *Config, d *Deps) { c.Mode, d.Daemon = predictor.ModeTimeslice, nil }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, deps := good()
			tt.edit(&cfg, &deps)
			_, err := New(cfg, deps)
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.field != "" && (err == nil || !strings.Contains(err.Error(), tt.field)):
				t.Fatalf("got %v, want an error naming %s", err, tt.field)
			}
		})
	}
}
