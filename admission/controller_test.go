package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/internal/fieldtest"
	"github.com/colocd/colocd/predictor"
)

// TestDecideOutcomes: what the controller makes of the policy's decisions
// (TestPolicyDecide has each outcome, reason and sentence): a grant or a
// throttle is a lease at the decided percentage, stored; a deny has no
// lease and no env, and counts the live leases (max_jobs); a 503 of the
// policy or of the store is passed on.
func TestDecideOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mode  predictor.Mode
		slo   float64
		setup func(t *testing.T, h *harness)
		req   func(r *Request)
		want  decisionWant
	}{
		{name: "grant when the SLO is loose", mode: predictor.ModeMPS, slo: 100,
			want: decisionWant{outcome: Grant, code: CodeFits, pct: 100, predicts: true}},
		{name: "grant at a max_pct below 100", mode: predictor.ModeMPS, slo: 100, req: func(r *Request) { r.MaxPct = 70 },
			want: decisionWant{outcome: Grant, code: CodeFits, pct: 70, predicts: true}},
		{name: "throttle when only a lower pct fits", mode: predictor.ModeMPS, slo: 9,
			want: decisionWant{outcome: Throttle, code: CodeThrottledToFit, pct: 50, predicts: true}},
		{name: "deny when even min_pct violates", mode: predictor.ModeMPS, slo: 6.9,
			want: decisionWant{outcome: Deny, code: CodeSLOViolation, predicts: true}},
		{name: "deny for memory", mode: predictor.ModeMPS, slo: 100,
			setup: func(t *testing.T, h *harness) { h.dev.free = 2048 + 4095 },
			want:  decisionWant{outcome: Deny, code: CodeInsufficientMemory}},
		{name: "deny for max_jobs", mode: predictor.ModeMPS, slo: 100,
			setup: func(t *testing.T, h *harness) {
				h.c.cfg.MaxJobs = 1
				mustDecide(t, h, request("first"), Grant)
			},
			want: decisionWant{outcome: Deny, code: CodeMaxJobs}},
		{name: "unhealthy GPU", mode: predictor.ModeMPS, slo: 100,
			setup: func(t *testing.T, h *harness) { h.dev.bad = "XID 79: GPU has fallen off the bus" },
			want:  decisionWant{outcome: Deny, code: CodeGPUUnhealthy, wantErr: ErrUnavailable}},
		{name: "time slicing grants at 100 whatever max_pct", mode: predictor.ModeTimeslice, slo: 100, req: func(r *Request) { r.MaxPct = 40 },
			want: decisionWant{outcome: Grant, code: CodeFits, pct: 100, predicts: true}},
		{name: "predictor failure", mode: predictor.ModeMPS, slo: 100,
			setup: func(t *testing.T, h *harness) { h.c.deps.Predictor = failingPredictor{} },
			want:  decisionWant{outcome: Deny, code: CodePredictorUnhealthy, wantErr: ErrUnavailable}},
		{name: "store failure", mode: predictor.ModeMPS, slo: 100,
			setup: func(t *testing.T, h *harness) { h.c.deps.Store = failingStore{h.store} },
			want:  decisionWant{outcome: Deny, code: CodeStoreUnavailable, wantErr: ErrUnavailable}},
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
			tt.want.check(t, d, err)
			if tt.want.outcome == Deny {
				if d.Lease != nil || d.Env != nil {
					t.Errorf("a deny with lease %v, token %q", d.Lease, tokenOf(d))
				}
				return
			}
			if d.Lease == nil || d.Lease.Pct != tt.want.pct {
				t.Fatalf("lease %+v, want one at %d %%", d.Lease, tt.want.pct)
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

// grantTwo grants jobs a and b on h, in that order.
func grantTwo(t testing.TB, h *harness) (a, b Decision) {
	t.Helper()
	return mustDecide(t, h, request("a"), Grant), mustDecide(t, h, request("b"), Grant)
}

// wantInvalid fails t unless err, what the call named what returned, is
// ErrInvalid (a 400) and its text holds each of wants; it reports whether
// it was.
func wantInvalid(t testing.TB, what string, err error, wants ...string) bool {
	t.Helper()
	ok := errors.Is(err, ErrInvalid)
	if !ok {
		t.Errorf("%s: err = %v, want ErrInvalid", what, err)
	}
	return fieldtest.WantText(t, err, wants...) && ok
}

// mustQuote is h's quote for req, failing t on an error.
func mustQuote(t testing.TB, h *harness, req Request) Decision {
	t.Helper()
	d, err := h.c.Quote(context.Background(), req)
	if err != nil {
		t.Fatal(err)
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

// TestUnavailableMessages: the reason reaches both the error (503) and the
// decision's sentence.
func TestUnavailableMessages(t *testing.T) {
	t.Parallel()
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

func TestQuoteHasNoEffects(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 9, func(c *Config) { c.MaxJobs = 1 })
	for range 3 {
		d := mustQuote(t, h, request("r1"))
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
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 9, nil)
	plain := mustQuote(t, h, request("r1"))
	misses := h.model.Stats().Misses
	keyed := request("r1")
	keyed.ProfileKey = keyed.Profile.Key()
	got := mustQuote(t, h, keyed)
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
	t.Parallel()
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
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	req := request("r1")
	req.MinPct = 0
	_, err := h.c.Decide(context.Background(), req)
	var ve *field.List
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &ve) || ve.Errors[0].Path != "compute.min_pct" {
		t.Fatalf("got %v", err)
	}
}

// TestProfileValidatedUnlessVouched: a request without its profile's key
// has the profile validated, field by field, even after the same profile
// name passed before; one that brings the key was validated at the edge.
func TestProfileValidatedUnlessVouched(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 100, nil)
	ctx := context.Background()
	if _, err := h.c.Quote(ctx, request("r1")); err != nil {
		t.Fatal(err)
	}
	bad := request("r2")
	bad.Profile = trainingProfile("resnet")
	bad.Profile.Ops[1].DurUS = -5 // same name, one op broken
	_, err := h.c.Quote(ctx, bad)
	var ve *field.List
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
	t.Parallel()
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
	t.Parallel()
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
		{"lease default above max", func(c *Config, _ *Deps) { c.Lease.Default = 2 * DefaultLeaseMax }, "lease.default"},
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
