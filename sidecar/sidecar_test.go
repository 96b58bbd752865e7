package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/natstest"
	"github.com/colocd/colocd/internal/runtest"
	"github.com/colocd/colocd/predictor"
	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The OTel SDK's global error handler and the nats-server's
		// store flushers end with the process, not with each server.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		// nats.go's object store Put can strand one goroutine on a busy
		// machine (bus/main_test.go, natsAsyncReplyRace).
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
	)
}

const (
	serviceProfile = "../testdata/profiles/v100-infer-200.json"
	trainProfile   = "../testdata/profiles/v100-train-step.json"
	testRequests   = 300
)

// testConfig is a sidecar on a simulated H200 with an embedded NATS server
// on a free port, one inference service with the given SLO.
func testConfig(t testing.TB, id string, sloMS float64) *configs.Config {
	t.Helper()
	c := configs.Default()
	c.Sidecar.ID = id
	c.Sidecar.DataDir = t.TempDir()
	c.NATS.Listen = "127.0.0.1:0"
	c.GPU.Backend = configs.BackendSim
	c.Telemetry.HTTP = "127.0.0.1:0"
	c.Predictor.Requests = testRequests
	// The point estimate: the tests set SLOs from p99At, the predictor's
	// point figure; TestDecisionHoldsUpperBound runs the default.
	c.Predictor.Confidence = 0
	c.Services = []configs.Service{{Name: "v100-infer", Profile: serviceProfile, RateRPS: 8, SLO: configs.SLO{P99MS: sloMS}}}
	c.Admission.MaxJobs = 3
	// Cold decisions next to live leases, under the race detector on a
	// busy machine, can take longer than the default 5 s; a test of the
	// timeout sets its own.
	c.Admission.DecisionTimeout = 10 * time.Minute
	return &c
}

// running is a sidecar whose Run loop a test controls.
type running struct {
	*Sidecar
	stop func() error
}

func start(t testing.TB, cfg *configs.Config, opts Options) *running {
	t.Helper()
	s, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return runSidecar(t, s)
}

// runSidecar runs s until the test ends, when it stops it and checks that
// Run ended well.
func runSidecar(t testing.TB, s *Sidecar) *running {
	r := &running{Sidecar: s, stop: runtest.Background(s.Run)}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return r
}

// sidecarConn is a connection with the sidecar's own identity.
func sidecarConn(t testing.TB, s *running) *nats.Conn {
	t.Helper()
	nc, err := s.embed.Conn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// launcherConn is a connection with the identity of the sidecar's own
// launchers (its default seed), as s.Conn gives it.
func launcherConn(t testing.TB, s *running) *nats.Conn {
	t.Helper()
	nc, err := s.Conn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func client(t *testing.T, s *running) *bus.Client {
	t.Helper()
	return bus.NewClient(launcherConn(t, s), bus.WithTimeout(60*time.Second))
}

var trainJSON = func() json.RawMessage {
	data, err := os.ReadFile(trainProfile)
	if err != nil {
		panic(err)
	}
	return data
}()

func admitReq(job string, minPct, maxPct int) *v1.AdmitRequest {
	return &v1.AdmitRequest{RequestID: "request-id-of-at-least-22-" + job, Job: v1.Job{ID: job, Owner: "test"}, Profile: trainJSON,
		MemoryMiB: 1000, Processes: 2, Compute: v1.Compute{MinPct: minPct, MaxPct: maxPct}}
}

// p99At predicts the service's latency p99 with one trainer at pct the way
// `colocd predict --mode mps` does: same profiles, calibration (the H200
// preset the simulated GPU picks), requests and seed.
func p99At(t testing.TB, pct int) float64 {
	t.Helper()
	return p99AtRate(t, pct, 8)
}

// testModel is what the test sidecars predict with: the service's and the
// trainer's profiles, and the preset the simulated H200 picks.
func testModel(t testing.TB) (inf, tr *predictor.Profile, cal *predictor.Calibration) {
	t.Helper()
	var err error
	if inf, err = predictor.LoadProfile(serviceProfile); err != nil {
		t.Fatal(err)
	}
	if tr, err = predictor.LoadProfile(trainProfile); err != nil {
		t.Fatal(err)
	}
	if cal, err = predictor.CalibrationPreset("NVIDIA H200"); err != nil {
		t.Fatal(err)
	}
	return inf, tr, cal
}

// p99AtRate is p99At at another request rate.
func p99AtRate(t testing.TB, pct int, rate float64) float64 {
	t.Helper()
	return p99Of(t, serviceProfile, rate, pct)
}

// p99Of predicts the p99 of the inference profile at path at rate, next
// to one trainer at each of pcts.
func p99Of(t testing.TB, path string, rate float64, pcts ...int) float64 {
	t.Helper()
	_, tr, cal := testModel(t)
	inf, err := predictor.LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := &predictor.Scenario{Inference: inf, RateRPS: rate, Requests: testRequests, Seed: 1, DeviceSMs: 132}
	for _, pct := range pcts {
		sc.Training, sc.TrainingPct = append(sc.Training, tr), append(sc.TrainingPct, float64(pct))
	}
	var pr predictor.Predictor
	pred, err := pr.PredictMPS(sc, cal.MPS.Params())
	if err != nil {
		t.Fatal(err)
	}
	return pred.Inference.LatencyMS.P99
}

// TestDecisions: over NATS, a decision for a real reason (only lower
// percentages fit) is a throttle with its lease, token and env, and its
// predicted p99 is what the predictor says for the same inputs. Each other
// outcome is admission.TestDecisionScenarios.
func TestDecisions(t *testing.T) {
	t.Parallel()
	p10, p100 := p99At(t, 10), p99At(t, 100)
	if !(p10 < p100) {
		t.Fatalf("p99 at 10 %% = %v, at 100 %% = %v: the scenario has no room to throttle", p10, p100)
	}
	s := start(t, testConfig(t, "", (p10+p100)/2/0.9), Options{}) // admission keeps p99 within 90 % of the SLO
	d, err := client(t, s).Admit(context.Background(), s.ID(), admitReq("job-1", 10, 100))
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision != v1.DecisionThrottle || d.Reason.Code != string(admission.CodeThrottledToFit) {
		t.Fatalf("decision %s (%s: %s), want %s (%s)", d.Decision, d.Reason.Code, d.Reason.Message, v1.DecisionThrottle, admission.CodeThrottledToFit)
	}
	l := d.Lease
	if l == nil || l.Token == "" || l.Env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != fmt.Sprint(l.ActiveThreadPct) {
		t.Fatalf("lease %+v: want a token and the percentage in the env", l)
	}
	if got, want := d.Predictions[0].PredictedP99MS, p99At(t, l.ActiveThreadPct); got != want {
		t.Errorf("predicted p99 %v ms at %d %%, colocd predict gives %v", got, l.ActiveThreadPct, want)
	}
	if !(l.ActiveThreadPct > 10 && l.ActiveThreadPct < 100) {
		t.Errorf("throttled to %d %%", l.ActiveThreadPct)
	}
}

// TestProfileByReference: a profile put in the object store once decides
// exactly as the same profile sent inline; a reference to nothing, a
// malformed one, or both forms at once are refused with the field named.
// (Direct admits, not quotes: a quote's answers are collected for a fixed
// wait, which a loaded CI machine can overrun.)
func TestProfileByReference(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "", (p99At(t, 10)+p99At(t, 100))/2/0.9), Options{})
	c := client(t, s)
	ctx := context.Background()
	inline := leased(ctx, t, c, s.ID(), admitReq("job-inline", 10, 100))
	if err := c.Release(ctx, s.ID(), &v1.LeaseRef{LeaseID: inline.Lease.ID, Token: inline.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	// Launchers may not write the profile store; the sidecar's own
	// identity (an operator's tool) may.
	putter := bus.NewClient(sidecarConn(t, s))
	ref, err := putter.PutProfile(ctx, trainJSON)
	if err != nil {
		t.Fatal(err)
	}
	if ref != v1.ProfileRef(trainJSON) {
		t.Fatalf("ref %s, want %s", ref, v1.ProfileRef(trainJSON))
	}
	byRef := admitReq("job-ref", 10, 100)
	byRef.Profile, byRef.ProfileRef = nil, ref
	d, err := c.Admit(ctx, s.ID(), byRef)
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision != inline.Decision || d.Lease == nil || d.Lease.ActiveThreadPct != inline.Lease.ActiveThreadPct ||
		d.Predictions[0].PredictedP99MS != inline.Predictions[0].PredictedP99MS {
		t.Fatalf("by reference: %+v; inline: %+v", d, inline)
	}
	// "profile": null, as Python and JavaScript clients write it, is no profile.
	nullInline := admitReq("job-null", 10, 100)
	nullInline.Profile, nullInline.ProfileRef = json.RawMessage("null"), ref
	wantLeases := 1
	if d, err := c.Admit(ctx, s.ID(), nullInline); err != nil || d.Decision == "" { // a decision (the lease above now counts in it)
		t.Errorf(`"profile": null with a profile_ref: %+v, %v`, d, err)
	} else if d.Lease != nil {
		wantLeases++
	}
	notProfile, err := putter.PutProfile(ctx, []byte(`{"format": "colocd.profile/v1"}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		edit   func(*v1.AdmitRequest)
		code   int
		phrase string
	}{
		{"unknown reference", func(r *v1.AdmitRequest) { r.Profile, r.ProfileRef = nil, v1.ProfileRef([]byte("nothing")) }, v1.CodeNotFound, "put it there first"},
		{"malformed reference", func(r *v1.AdmitRequest) { r.Profile, r.ProfileRef = nil, "sha256:xyz" }, v1.CodeBadRequest, "profile_ref: want"},
		{"both forms", func(r *v1.AdmitRequest) { r.ProfileRef = ref }, v1.CodeBadRequest, "profile, profile_ref: want one of the two"},
		{"neither", func(r *v1.AdmitRequest) { r.Profile = nil }, v1.CodeBadRequest, "or a profile_ref"},
		{"a stored object that is no profile", func(r *v1.AdmitRequest) { r.Profile, r.ProfileRef = nil, notProfile }, v1.CodeBadRequest, "profile_ref " + notProfile + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := admitReq("job-bad", 10, 100)
			tt.edit(r)
			_, err := c.Admit(ctx, s.ID(), r)
			if v1.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.phrase) {
				t.Errorf("got %v (code %d), want code %d and %q", err, v1.CodeOf(err), tt.code, tt.phrase)
			}
		})
	}
	if n := len(s.adm.Leases()); n != wantLeases {
		t.Errorf("%d leases, want %d: the refused requests took none", n, wantLeases)
	}
}

func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "gpu-a", 1000), Options{})
	c := client(t, s)
	ctx := context.Background()
	req := admitReq("job-1", 10, 100)
	d := leased(ctx, t, c, s.ID(), req)
	ref := &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}

	// An idempotent retry returns the same lease, not a second one.
	again, err := c.Admit(ctx, s.ID(), req)
	if err != nil || again.Lease == nil || again.Lease.ID != d.Lease.ID || again.Lease.Token != d.Lease.Token {
		t.Fatalf("retry: %v, lease %+v, want the first one %+v", err, again.Lease, d.Lease)
	}
	// The same request_id with another token is someone else: refused.
	if _, err := c.Admit(ctx, s.ID(), admitReq("job-1", 10, 100)); v1.CodeOf(err) != v1.CodeConflict {
		t.Fatalf("a replay of the request_id with another token: %v, want a 409", err)
	}
	if st, _ := c.Status(ctx, s.ID()); len(st.Leases) != 1 {
		t.Fatalf("%d leases after a retry, want 1", len(st.Leases))
	}

	// A wrong token is refused and changes nothing.
	before, _ := c.Status(ctx, s.ID())
	for _, call := range []func() error{
		func() error {
			_, err := c.Renew(ctx, s.ID(), &v1.LeaseRef{LeaseID: ref.LeaseID, Token: "wrong"})
			return err
		},
		func() error { return c.Release(ctx, s.ID(), &v1.LeaseRef{LeaseID: ref.LeaseID, Token: "wrong"}) },
		func() error {
			return c.Register(ctx, s.ID(), &v1.RegisterRequest{LeaseID: ref.LeaseID, Token: "wrong", PIDs: []int{7}})
		},
	} {
		if err := call(); v1.CodeOf(err) != v1.CodeForbidden {
			t.Errorf("wrong token: err = %v, want 403", err)
		}
	}
	after, _ := c.Status(ctx, s.ID())
	if len(after.Leases) != 1 || after.Leases[0].ExpiresAt != before.Leases[0].ExpiresAt || len(after.Leases[0].PIDs) != 0 {
		t.Errorf("a refused call changed the lease: %+v → %+v", before.Leases, after.Leases)
	}

	// Register, renew, release.
	if err := c.Register(ctx, s.ID(), &v1.RegisterRequest{LeaseID: ref.LeaseID, Token: ref.Token, PIDs: []int{4242, 4243}}); err != nil {
		t.Fatal(err)
	}
	renewed, err := c.Renew(ctx, s.ID(), ref)
	if err != nil || !renewed.ExpiresAt.After(d.Lease.ExpiresAt.Add(-time.Second)) {
		t.Fatalf("renew: %v %+v", err, renewed)
	}
	// The simulated GPU shows the lease's memory once its processes registered.
	if st, _ := c.Status(ctx, s.ID()); st.GPU.MemoryTotalMiB-st.GPU.MemoryFreeMiB != 1000 {
		t.Errorf("simulated GPU uses %d MiB with one 1000 MiB lease", st.GPU.MemoryTotalMiB-st.GPU.MemoryFreeMiB)
	}
	if err := c.Release(ctx, s.ID(), ref); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, s.ID(), ref); v1.CodeOf(err) != v1.CodeNotFound {
		t.Errorf("second release: err = %v, want 404", err)
	}
	// A released lease with processes is freed once the expiry loop has
	// evicted them (on the simulated daemon), at once but not in the call.
	var st *v1.Status
	if !eventually(ctx, func() bool {
		st, _ = c.Status(ctx, s.ID())
		return st != nil && len(st.Leases) == 0 && st.GPU.MemoryFreeMiB == st.GPU.MemoryTotalMiB
	}) {
		t.Errorf("after release: %d leases, %d of %d MiB free", len(st.Leases), st.GPU.MemoryFreeMiB, st.GPU.MemoryTotalMiB)
	}
}

// An expired lease frees its capacity and an expire event lands on the
// stream: a launcher that listens sees it as it happens, and one that was
// not listening can still read it.
func TestExpiry(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "gpu-a", 1000), Options{})
	c := client(t, s)
	ctx := context.Background()
	live, err := c.Events(ctx, s.ID(), "job-x", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	req := admitReq("job-x", 10, 100)
	req.LeaseSeconds = 1
	d := leased(ctx, t, c, s.ID(), req)
	expired := func(who string, sub *bus.EventSubscription) {
		t.Helper()
		select {
		case rec := <-sub.C():
			if rec.Event.Type != v1.EventExpire || rec.Event.LeaseID != d.Lease.ID {
				t.Errorf("%s: event %+v, want expire of %s", who, rec.Event, d.Lease.ID)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no expire event in 30 s", who)
		}
	}
	expired("listening", live)
	st, err := c.Status(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Leases) != 0 {
		t.Errorf("%d leases after the expire event, want none", len(st.Leases))
	}
	late, err := c.Events(ctx, s.ID(), "job-x", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Stop()
	expired("not listening", late)
}

// Fifty launchers race for a GPU that takes three jobs: exactly three win.
func TestConcurrentAdmitsRespectCapacity(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "gpu-a", 10000), Options{})
	c := client(t, s)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, denied := 0, 0
	for i := range 50 {
		wg.Go(func() {
			d, err := c.Admit(context.Background(), s.ID(), admitReq(fmt.Sprintf("job-%d", i), 10, 100))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("admit %d: %v", i, err)
			case d.Lease != nil:
				granted++
			case d.Reason.Code == string(admission.CodeMaxJobs):
				denied++
			default:
				t.Errorf("admit %d: %s (%s)", i, d.Decision, d.Reason.Message)
			}
		})
	}
	wg.Wait()
	if granted != 3 || denied != 47 {
		t.Errorf("%d granted, %d denied for max_jobs 3; want 3 and 47", granted, denied)
	}
	if st, _ := c.Status(context.Background(), s.ID()); len(st.Leases) != 3 {
		t.Errorf("%d leases stored, want 3", len(st.Leases))
	}
}

// A sidecar that restarts on the same data directory has every lease it
// had, and their tokens still work; records in the store that are no lease
// are skipped.
func TestRestartKeepsLeases(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-a", 10000)
	cfg.Admission.Identity.MaxWeight = 10 // the weights below are the launcher's to claim
	first := start(t, cfg, Options{})
	c := client(t, first)
	ctx := context.Background()
	var refs []*v1.LeaseRef
	for i, job := range []string{"job-1", "job-2"} {
		req := admitReq(job, 10, 100)
		req.Job.Weight = float64(i) + 2.5 // kept on the lease
		d, err := c.Admit(ctx, first.ID(), req)
		if err != nil || d.Lease == nil {
			t.Fatalf("admit %s: %v %+v", job, err, d)
		}
		refs = append(refs, &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token})
	}
	// Records that are no lease (written by whoever held a key that could)
	// are skipped at the restart, not a failed start.
	kv := leaseBucket(ctx, t, first)
	// The 200 KB profile is in the profile store, not in the record: a
	// record stays far below NATS's 1 MiB message limit.
	rec, err := kv.Get(ctx, refs[0].LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Value()); n > 16<<10 || !strings.Contains(string(rec.Value()), `"profile_ref":"sha256:`) {
		t.Errorf("the lease record is %d bytes and names no profile_ref", n)
	}
	for key, value := range map[string]string{"garbage": "{not json", "other": `{"id":"` + refs[0].LeaseID + `"}`} {
		if _, err := kv.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	second := start(t, cfg, Options{})
	c2 := client(t, second)
	st, err := c2.Status(ctx, second.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Leases) != 2 {
		t.Fatalf("%d leases after a restart, want 2", len(st.Leases))
	}
	for _, l := range second.adm.Leases() {
		if want := map[string]float64{"job-1": 2.5, "job-2": 3.5}[l.JobID]; l.Weight != want {
			t.Errorf("%s: weight %g after a restart, want %g", l.JobID, l.Weight, want)
		}
	}
	for _, ref := range refs {
		if _, err := c2.Renew(ctx, second.ID(), ref); err != nil {
			t.Errorf("renew %s after restart: %v", ref.LeaseID, err)
		}
	}
}

// externalNATS runs a nats-server configured with the permission set
// users are told to deploy (deploy/nats/colocd-auth.conf), and returns its
// URL and the seed files of its sidecar and launcher users.
func externalNATS(t *testing.T) (url, sidecarSeed, launcherSeed string) {
	ns, sidecarSeed, launcherSeed := natstest.DocumentedServer(t, "../deploy/nats/colocd-auth.conf")
	return ns.ClientURL(), sidecarSeed, launcherSeed
}

// launcherClient connects to url with a launcher's seed.
func launcherClient(t testing.TB, url, seed string) *bus.Client {
	t.Helper()
	nc, err := bus.Connect(url, bus.ConnectOptions{Name: "launcher", NKeySeedFile: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return bus.NewClient(nc, bus.WithTimeout(60*time.Second))
}

// Every sidecar answers a quote; none takes a lease for it. Both sidecars
// are users of one nats-server that has the documented permissions.
func TestQuoteFromTwoSidecars(t *testing.T) {
	t.Parallel()
	url, sidecarSeed, launcherSeed := externalNATS(t)
	cfgA := testConfig(t, "gpu-a", 10000)
	cfgB := testConfig(t, "gpu-b", 1) // an SLO no co-location can meet
	for _, c := range []*configs.Config{cfgA, cfgB} {
		c.NATS.URL, c.NATS.NKey = url, sidecarSeed
	}
	a := start(t, cfgA, Options{})
	b := start(t, cfgB, Options{})
	lc := launcherClient(t, url, launcherSeed)
	// Up to 30 s: the quote ends once both sidecars answered, however slow a
	// busy machine makes them.
	ds, err := lc.QuoteExpect(context.Background(), admitReq("job-q", 10, 100), 30*time.Second, []string{"gpu-a", "gpu-b"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range ds {
		got[d.Sidecar] = d.Decision
		if d.Lease != nil {
			t.Errorf("quote from %s carries a lease", d.Sidecar)
		}
	}
	if got["gpu-a"] != v1.DecisionGrant || got["gpu-b"] != v1.DecisionDeny || len(got) != 2 {
		t.Errorf("quotes %v, want gpu-a grant and gpu-b deny", got)
	}
	for _, s := range []*running{a, b} {
		if st, _ := lc.Status(context.Background(), s.ID()); len(st.Leases) != 0 {
			t.Errorf("%s has %d leases after a quote", s.ID(), len(st.Leases))
		}
	}
}

// The launcher's traceparent is the decision span's parent; the decision
// span has the prediction spans as children and the decision's attributes.
func TestDecisionTraced(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := start(t, testConfig(t, "gpu-a", 10000), Options{TracerProvider: tp})
	launcher := sdktrace.NewTracerProvider() // the launcher's own process
	ctx, span := launcher.Tracer("launcher").Start(context.Background(), "launch")
	if _, err := client(t, s).Admit(ctx, s.ID(), admitReq("job-t", 10, 100)); err != nil {
		t.Fatal(err)
	}
	span.End()
	var admit sdktrace.ReadOnlySpan
	predicts := 0
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case spanAdmit:
			admit = sp
		case "colocd.predict":
			predicts++
		}
	}
	if admit == nil {
		t.Fatal("no colocd.admit span")
	}
	if p := admit.Parent(); !p.IsRemote() || p.SpanID() != span.SpanContext().SpanID() || p.TraceID() != span.SpanContext().TraceID() {
		t.Errorf("admit span's parent %v, want the launcher's span %v (remote)", p, span.SpanContext())
	}
	attrs := map[string]string{}
	for _, kv := range admit.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for _, k := range []string{"colocd.job", "colocd.gpu", "colocd.decision", "colocd.pct", "colocd.predicted_p99_ms", "colocd.slo_p99_ms"} {
		if attrs[k] == "" {
			t.Errorf("admit span lacks %s (has %v)", k, attrs)
		}
	}
	if predicts == 0 {
		t.Error("no colocd.predict child span")
	}
	for _, sp := range rec.Ended() { // (the fleet summary's predictions have a trace of their own)
		if sp.Name() == "colocd.predict" && sp.SpanContext().TraceID() == admit.SpanContext().TraceID() && sp.Parent().SpanID() != admit.SpanContext().SpanID() {
			t.Errorf("predict span's parent %v is not the admit span", sp.Parent().SpanID())
		}
	}
}

func TestHTTPEndpoints(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "gpu-a", 10000), Options{})
	if _, err := client(t, s).Admit(context.Background(), s.ID(), admitReq("job-m", 10, 100)); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + s.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Errorf("/readyz %d %q", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{`colocd_decisions_total{code="fits"`, `colocd_leases{`, `colocd_predicted_p99_seconds{`, `colocd_slo_p99_seconds{`,
		`colocd_ready{component="mps"`, `colocd_leases_active_thread_pct{`, `colocd_prediction_duration_seconds_bucket{`,
		`colocd_gpu_memory_bytes{`, `colocd_identity_leases{`, `colocd_identity_active_thread_pct{`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// What `promtool check metrics` says, by its own linter.
	problems, err := promlint.New(strings.NewReader(metrics)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promtool check metrics: %s: %s", p.Metric, p.Text)
	}
}

// A GPU fault makes the sidecar unready and new admissions fail with 503;
// the lease it had is revoked at the guard's next round, and its launcher
// told (admission.TestFaultRevokesEveryLease has the details).
func TestUnhealthyGPUDenies503(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "gpu-a", 10000), Options{})
	c := client(t, s)
	ctx := context.Background()
	if d, err := c.Admit(ctx, s.ID(), admitReq("job-1", 10, 100)); err != nil || d.Lease == nil {
		t.Fatalf("admit: %v", err)
	}
	sub, err := c.Events(ctx, s.ID(), "job-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	if err := s.sim.gpu.InjectXID(79); err != nil { // fallen off the bus: not the workload's fault
		t.Fatal(err)
	}
	// The health loop applies it, then says so (Health is set first).
	timeout := time.After(30 * time.Second)
	for applied := false; !applied; {
		select {
		case e, ok := <-s.sim.gpu.Events():
			if !ok {
				t.Fatal("gpu events closed")
			}
			applied = e.XID == 79
		case <-timeout:
			t.Fatal("the health loop did not apply the XID 79 in 30 s")
		}
	}
	if s.Ready() == nil {
		t.Fatal("ready after an XID 79")
	}
	_, err = c.Admit(ctx, s.ID(), admitReq("job-2", 10, 100))
	var be *v1.Error
	if !errors.As(err, &be) || be.Code != v1.CodeUnavailable || !strings.Contains(strings.ToLower(be.Description), "gpu") {
		t.Errorf("admit on a faulted GPU: err = %v, want 503 naming the GPU", err)
	}
	if st, err := c.Status(ctx, s.ID()); err != nil || st.Ready {
		t.Errorf("status ready %v (%v), want not ready", st != nil && st.Ready, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case rec := <-sub.C():
		if rec.Event.Type != v1.EventRevoke || !strings.Contains(rec.Event.Reason, "79") {
			t.Errorf("event %+v, want the lease revoked for the XID 79", rec.Event)
		}
	case <-wctx.Done():
		t.Error("no revoke of the lease within 30 s of the fault")
	}
}

// TestDecisionHoldsUpperBound: with the default confidence, a sidecar
// holds the upper end of the p99's interval to the SLO: an SLO the point
// estimate meets at 100 % but its upper end does not is a throttle, and
// the wire carries both figures as the predictor gives them.
func TestDecisionHoldsUpperBound(t *testing.T) {
	t.Parallel()
	inf, tr, cal := testModel(t)
	at := func(pct int) (point, upper float64) {
		var pr predictor.Predictor
		sc := &predictor.Scenario{Inference: inf, Training: []*predictor.Profile{tr}, RateRPS: 8, Requests: testRequests, Seed: 1,
			TrainingPct: []float64{float64(pct)}, DeviceSMs: 132, Confidence: predictor.DefaultConfidence}
		pred, err := pr.PredictMPS(sc, cal.MPS.Params())
		if err != nil {
			t.Fatal(err)
		}
		return pred.Inference.LatencyMS.P99, pred.Inference.LatencyInterval.P99[1]
	}
	point, upper := at(100)
	if !(upper > point) {
		t.Fatalf("upper end %v not above the point %v: nothing to test", upper, point)
	}
	cfg := testConfig(t, "", (point+upper)/2/0.9)
	cfg.Predictor.Confidence = configs.Default().Predictor.Confidence
	s := start(t, cfg, Options{})
	d, err := client(t, s).Admit(context.Background(), s.ID(), admitReq("job-1", 10, 100))
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision != v1.DecisionThrottle || d.Lease == nil {
		t.Fatalf("decision %s (%s), want a throttle: the point fits at 100 %%, its upper end does not", d.Decision, d.Reason.Message)
	}
	p, u := at(d.Lease.ActiveThreadPct)
	if sp := d.Predictions[0]; sp.PredictedP99MS != p || sp.PredictedP99UpperMS != u {
		t.Errorf("wire: predicted %v up to %v at %d %%, the predictor says %v up to %v", sp.PredictedP99MS, sp.PredictedP99UpperMS, d.Lease.ActiveThreadPct, p, u)
	}
	if u > 0.9*cfg.Services[0].SLO.P99MS {
		t.Errorf("granted %d %% with an upper end %v above the limit %v", d.Lease.ActiveThreadPct, u, 0.9*cfg.Services[0].SLO.P99MS)
	}
}
