package launch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/natstest"
	"github.com/colocd/colocd/internal/runtest"
	"github.com/colocd/colocd/internal/simconfig"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/sidecar"
)

const (
	serviceProfile = "../testdata/profiles/v100-infer-200.json"
	trainProfile   = "../testdata/profiles/v100-train-step.json"
	testRequests   = 300
)

// node is a sidecar on a simulated H200 with an embedded NATS server on a
// fixed port, its config in a file it watches (edit it to reload), and its
// data in a directory that survives a restart.
type node struct {
	t         *testing.T
	dir, path string
	port      int
	slo       float64
	admission string
	mu        sync.Mutex
	s         *sidecar.Sidecar
	stop      func()
}

func newNode(t *testing.T, slo float64, admission string) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), port: natstest.FreePort(t), slo: slo, admission: admission}
	n.path = filepath.Join(n.dir, "colocd.yaml")
	n.write()
	n.start()
	t.Cleanup(n.down)
	return n
}

// write replaces the config file, as a ConfigMap swap does.
func (n *node) write() {
	n.t.Helper()
	simconfig.Write(n.t, n.path, simconfig.File{ID: "gpu-run", DataDir: filepath.Join(n.dir, "data"), Listen: fmt.Sprintf("127.0.0.1:%d", n.port),
		Requests: testRequests, Profile: serviceProfile, SLOMS: n.slo, Admission: n.admission})
}

func (n *node) start() {
	n.t.Helper()
	cfg, err := configs.Load(n.path)
	if err != nil {
		n.t.Fatal(err)
	}
	s, err := sidecar.New(context.Background(), cfg, sidecar.Options{ConfigPath: n.path})
	if err != nil {
		n.t.Fatal(err)
	}
	stop := runtest.Background(s.Run)
	n.mu.Lock()
	n.s = s
	n.stop = func() {
		if err := stop(); err != nil {
			n.t.Errorf("sidecar: %v", err)
		}
	}
	n.mu.Unlock()
}

// down stops the sidecar and its NATS server (leases stay in its store).
func (n *node) down() {
	n.mu.Lock()
	stop := n.stop
	n.stop = nil
	n.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// client connects as colocd run does: a launcher that stays connected.
func (n *node) client() *bus.Client {
	n.t.Helper()
	nc, err := bus.Connect(n.s.ClientURL(), bus.ConnectOptions{NKeySeedFile: n.s.LauncherNKeyFile(), Policy: bus.StayConnected,
		Options: []nats.Option{nats.ReconnectWait(200 * time.Millisecond), nats.ReconnectJitter(0, 0)}})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(nc.Close)
	// 10 s: an admit on a machine busy with other jobs can take seconds.
	return bus.NewClient(nc, bus.WithTimeout(10*time.Second))
}

// admitter admits the training profile as job at the node's sidecar.
func (n *node) admitter(c *bus.Client, job string, leaseSeconds int) Admitter {
	raw, err := os.ReadFile(trainProfile)
	if err != nil {
		n.t.Fatal(err)
	}
	return func(ctx context.Context) (*Grant, error) {
		req := &v1.AdmitRequest{Job: v1.Job{ID: job, Owner: "test"}, Profile: raw, MemoryMiB: 1000, Processes: 2,
			Compute: v1.Compute{MinPct: 10, MaxPct: 100}, LeaseSeconds: leaseSeconds}
		d, err := c.Admit(ctx, "gpu-run", req)
		return &Grant{Sidecar: "gpu-run", Decision: d}, err
	}
}

// leases returns the sidecar's live leases (nil when it does not answer):
// not those released, which status lists until their processes are gone.
func leases(c *bus.Client) []v1.Lease {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.Status(ctx, "gpu-run")
	if err != nil {
		return nil
	}
	var live []v1.Lease
	for _, l := range st.Leases {
		if l.State != "released" {
			live = append(live, l)
		}
	}
	return live
}

// wantReleased fails t unless the sidecar has no live lease (when says
// when).
func wantReleased(t *testing.T, c *bus.Client, when string) {
	t.Helper()
	if ls := leases(c); len(ls) != 0 {
		t.Errorf("leases %s: %+v, want none: released", when, ls)
	}
}

// p99At is the service's predicted p99 beside one trainer at pct: what the
// node's sidecar predicts.
func p99At(t *testing.T, pct int) float64 {
	t.Helper()
	inf, err := predictor.LoadProfile(serviceProfile)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := predictor.LoadProfile(trainProfile)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := predictor.CalibrationPreset("NVIDIA H200")
	if err != nil {
		t.Fatal(err)
	}
	var pr predictor.Predictor
	sc := &predictor.Scenario{Inference: inf, Training: []*predictor.Profile{tr}, RateRPS: 8, Requests: testRequests, Seed: 1,
		TrainingPct: []float64{float64(pct)}, DeviceSMs: 132}
	pred, err := pr.PredictMPS(sc, cal.MPS.Params())
	if err != nil {
		t.Fatal(err)
	}
	return pred.Inference.LatencyMS.P99
}

// childLog is what the test job wrote: one line per start, signal, exit.
type childLog struct{ path string }

func (l childLog) lines(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(l.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		out = append(out, sc.Text())
	}
	return out
}

func (l childLog) starts(t *testing.T) []string {
	var out []string
	for _, line := range l.lines(t) {
		if strings.HasPrefix(line, "start ") {
			out = append(out, line)
		}
	}
	return out
}

// field returns key's value in a log line ("pct=35" → "35").
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// records collects run's records.
type records struct {
	mu  sync.Mutex
	all []Record
}

func (r *records) add(rec Record) {
	r.mu.Lock()
	r.all = append(r.all, rec)
	r.mu.Unlock()
}

func (r *records) of(event string) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Record
	for _, rec := range r.all {
		if rec.Event == event {
			out = append(out, rec)
		}
	}
	return out
}

func (r *records) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.all {
		fmt.Fprintf(&b, "  %s %s: %s\n", rec.Time.Format("15:04:05.000"), rec.Event, rec.Message)
	}
	return b.String()
}

// config is a Config that runs the test job with env, logging to a file
// in dir, its records in recs.
func config(t *testing.T, recs *records, env ...string) (Config, childLog) {
	log := childLog{path: filepath.Join(t.TempDir(), "child.log")}
	base := append([]string{"COLOCD_TEST_CHILD=1", "CHILD_LOG=" + log.path, "PATH=" + os.Getenv("PATH"),
		"COLOCD_LEASE_TOKEN=stale-token-from-an-earlier-admit", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=99"}, env...)
	return Config{
		Command:       []string{os.Args[0], "-test.run=^$"},
		Env:           base,
		Grace:         3 * time.Second,
		RegisterEvery: 200 * time.Millisecond,
		OnRecord:      recs.add,
		backoff:       200 * time.Millisecond,
	}, log
}

// job is what a test needs to run the test job under n's sidecar: a
// launcher's client, the records run makes, and a Config that runs the job
// with env, whose own log is log.
func (n *node) job(env ...string) (c *bus.Client, recs *records, cfg Config, log childLog) {
	n.t.Helper()
	recs = &records{}
	cfg, log = config(n.t, recs, env...)
	return n.client(), recs, cfg, log
}

// waitFor polls ok every 50 ms for up to a minute: the events these tests
// wait for come within seconds; a minute says they never came.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("a minute on: %s", what)
		}
	}
}

// TestHoldsLeaseThenReleasesOnExit: a lease of 3 s with a first term of
// 1 s is held for over ten first terms with no gap (the status, read every
// 100 ms, always lists it at the granted percentage, registered with the
// command's PID); the command never restarts; it exits 7, and run exits 7
// with the lease released.
func TestHoldsLeaseThenReleasesOnExit(t *testing.T) {
	t.Parallel()
	// A first term of 3 s, not less: on a loaded machine the decision and
	// its reply can take a second, and a first term that ends before the
	// launcher registers its command is a lease lost (register: not found),
	// not the renewals this test is about.
	n := newNode(t, 100000, "lease: {first_term: 3s, default: 3s}")
	c, recs, cfg, log := n.job("CHILD_SLEEP=11s", "CHILD_EXIT=7")
	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := Run(context.Background(), cfg, c, n.admitter(c, "hold-1", 3))
		done <- result{res, err}
	}()
	waitFor(t, "the command started", func() bool { return len(log.starts(t)) == 1 })
	start := log.starts(t)[0]
	pid, _ := strconv.Atoi(field(start, "pid"))
	if got := field(start, "token"); got != "false" {
		t.Errorf("the command's env holds a lease token (token=%s): want none without PassToken", got)
	}
	if got := field(start, "pct"); got != "100" {
		t.Errorf("the command started at pct=%s, want the lease's 100 (not the stale 99 of the base env)", got)
	}
	// Polls every 100 ms, each a request over NATS: on a loaded machine
	// fewer fit in the command's 11 s, so what is asked is a poll at least
	// every half second on average over 10 s (three terms and more), each
	// one finding the lease.
	gaps, polls := 0, 0
	var first, last time.Time
	var result0 result
poll:
	for {
		select {
		case result0 = <-done:
			break poll
		case <-time.After(100 * time.Millisecond):
		}
		ls := leases(c)
		polls++
		if len(ls) != 1 || ls[0].JobID != "hold-1" {
			// After the command's exit the release may come first.
			if strings.Contains(strings.Join(log.lines(t), "\n"), "exit ") {
				continue
			}
			gaps++
			t.Logf("poll %d: leases %+v", polls, ls)
			continue
		}
		if first.IsZero() {
			first = time.Now()
		}
		last = time.Now()
	}
	if result0.err != nil || result0.res.Status != 7 {
		t.Fatalf("run: %+v, %v; want status 7\n%s", result0.res, result0.err, recs)
	}
	if span := last.Sub(first); gaps > 0 || span < 10*time.Second || polls < 20 {
		t.Errorf("%d gaps in %d polls over %s, want 0 in at least 20 over 10 s", gaps, polls, span.Round(time.Millisecond))
	}
	if got := len(log.starts(t)); got != 1 || result0.res.Restarts != 0 {
		t.Errorf("%d starts, %d restarts; want 1 and 0", got, result0.res.Restarts)
	}
	if len(recs.of("renewed")) > 0 || len(recs.of("lease_lost")) > 0 {
		t.Errorf("unexpected records:\n%s", recs)
	}
	reg := recs.of("registered")
	if len(reg) == 0 || reg[0].PIDs[0] != pid {
		t.Errorf("registered %v, want the command's pid %d first", reg, pid)
	}
	rel := recs.of("released")
	if len(rel) != 1 || *rel[0].Seconds > 1 {
		t.Errorf("released records %+v: want one, within 1 s of the exit", rel)
	} else {
		t.Logf("from the command's exit to the release: %.3f s", *rel[0].Seconds)
	}
	wantReleased(t, c, "after run")
}

// TestThrottleRestartsAtNewPercentage: the inference team lowers the SLO
// (a hot reload); the guard throttles the lease; run stops the command and
// starts it again at the new percentage, registered long before the
// deadline, and the sidecar sees the new PID at the new percentage: no
// revoke, no eviction.
func TestThrottleRestartsAtNewPercentage(t *testing.T) {
	t.Parallel()
	n, tighten := throttling(t)
	c, recs, cfg, log := n.job()
	done, cancel := n.launch(t, cfg, c, "thr-1", 0, recs)
	// The command runs, its signal handler set, before the SLO changes
	// (on a loaded machine the throttle could come first otherwise).
	waitFor(t, "the command started", func() bool { return len(log.starts(t)) == 1 })
	tighten()
	waitFor(t, "restarted", func() bool { return len(recs.of("restarted")) == 1 })
	thr := recs.of("throttled")
	if len(thr) != 1 || thr[0].FromPct != 100 || thr[0].Pct >= 100 || thr[0].Deadline == nil {
		t.Fatalf("throttled records %+v\n%s", thr, recs)
	}
	reg := recs.of("registered")[1]
	if reg.Time.After(*thr[0].Deadline) {
		t.Errorf("registered at %s, after the deadline %s", reg.Time, thr[0].Deadline)
	}
	// The restart's seconds run from the event to the new command
	// registered (it is said once that register is done).
	t.Logf("from the throttle event to the restarted command registered: %.3f s (deadline in 30 s)", *recs.of("restarted")[0].Seconds)
	waitFor(t, "the restarted command's first line", func() bool { return len(log.starts(t)) == 2 })
	starts := log.starts(t)
	if len(starts) != 2 || field(starts[1], "pct") != strconv.Itoa(thr[0].Pct) || field(starts[1], "restarts") != "1" {
		t.Errorf("starts %q: want a second at pct=%d, restarts=1", starts, thr[0].Pct)
	}
	newPID, _ := strconv.Atoi(field(starts[1], "pid"))
	ls := leases(c)
	if len(ls) != 1 || ls[0].ActiveThreadPct != thr[0].Pct || len(ls[0].PIDs) != 1 || ls[0].PIDs[0] != newPID {
		t.Errorf("leases %+v: want one at %d %% with pid %d", ls, thr[0].Pct, newPID)
	}
	if !strings.Contains(strings.Join(log.lines(t), "\n"), "sig=terminated") {
		t.Errorf("the first command got no SIGTERM: %q", log.lines(t))
	}
	cancel(SignalCause{Signal: syscall.SIGTERM})
	res := <-done
	if res.Status != 128+int(syscall.SIGTERM) || res.Restarts != 1 {
		t.Errorf("after SIGTERM: %+v, want status 143 and 1 restart", res)
	}
	if len(recs.of("revoked")) > 0 || len(recs.of("released")) != 1 {
		t.Errorf("records:\n%s", recs)
	}
	wantReleased(t, c, "after SIGTERM")
}

// TestSignalActionLetsTheJobCheckpoint: with --on-throttle signal:SIGUSR1
// the command gets SIGUSR1, exits by itself, and is started again.
func TestSignalActionLetsTheJobCheckpoint(t *testing.T) {
	t.Parallel()
	n, tighten := throttling(t)
	c, recs, cfg, log := n.job()
	cfg.OnThrottle = Action{Signal: syscall.SIGUSR1}
	done, cancel := n.launch(t, cfg, c, "sig-1", 0, recs)
	// The command runs, its signal handler set, before the SLO changes
	// (on a loaded machine the throttle could come first otherwise).
	waitFor(t, "the command started", func() bool { return len(log.starts(t)) == 1 })
	tighten()
	waitFor(t, "restarted", func() bool { return len(log.starts(t)) == 2 })
	if !strings.Contains(strings.Join(log.lines(t), "\n"), "sig=user defined signal 1") {
		t.Errorf("the command got no SIGUSR1: %q", log.lines(t))
	}
	cancel(SignalCause{Signal: syscall.SIGINT})
	if res := <-done; res.Status != 130 {
		t.Errorf("after SIGINT: %+v, want 130", res)
	}
}

// TestRevokeStopsTheCommand: an SLO no percentage can meet revokes the
// lease: run stops the command and exits ExitRevoked.
func TestRevokeStopsTheCommand(t *testing.T) {
	t.Parallel()
	n := newNode(t, 100000, "guard: {deadline: 20s}")
	c, recs, cfg, log := n.job()
	done, _ := n.launch(t, cfg, c, "rev-1", 0, recs)
	// The command runs (its log says so once its signal handler is set)
	// before the SLO changes: on a loaded machine the revoke could come
	// first otherwise, and find nothing to stop.
	waitFor(t, "the command started", func() bool { return len(log.starts(t)) == 1 })
	n.slo = 0.001
	n.write()
	select {
	case res := <-done:
		if res.Status != ExitRevoked {
			t.Errorf("run: %+v, want status %d\n%s", res, ExitRevoked, recs)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no end a minute after the SLO was made impossible\n%s", recs)
	}
	lines := strings.Join(log.lines(t), "\n")
	if !strings.Contains(lines, "sig=terminated") {
		t.Errorf("the command was not stopped with SIGTERM: %q", lines)
	}
}

// TestSidecarRestartKeepsTheCommand: the sidecar and its NATS server go
// away for 20 s and come back; the lease (40 s) is kept, renewed again,
// and the command never stops.
func TestSidecarRestartKeepsTheCommand(t *testing.T) {
	t.Parallel()
	n, c, recs, log, done, cancel := sidecarGoes(t, "restart-1", 40)
	time.Sleep(20 * time.Second)
	n.start()
	// The renew that failed while it was away succeeds again: the lease,
	// loaded from the store, is live, with the command's PID.
	waitFor(t, "the lease renewed after the restart", func() bool {
		ls := leases(c)
		return len(ls) == 1 && ls[0].ExpiresAt.After(time.Now().Add(30*time.Second))
	})
	if got := log.lines(t); len(got) != 1 {
		t.Errorf("the command's log %q: want one start, no signal", got)
	}
	if len(recs.of("stopping")) > 0 || len(recs.of("lease_lost")) > 0 {
		t.Errorf("records:\n%s", recs)
	}
	cancel(SignalCause{Signal: syscall.SIGTERM})
	if res := <-done; res.Status != 143 || res.Restarts != 0 {
		t.Errorf("run: %+v", res)
	}
}

// TestUnrenewableLeaseStopsBeforeExpiry: the sidecar goes for good; the
// command is stopped before the lease (6 s) would end unrenewed, and run
// exits ExitLeaseLost once it has.
func TestUnrenewableLeaseStopsBeforeExpiry(t *testing.T) {
	t.Parallel()
	_, _, recs, log, done, _ := sidecarGoes(t, "lost-1", 6)
	var res Result
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("run did not end a minute after the sidecar went\n%s", recs)
	}
	if res.Status != ExitLeaseLost {
		t.Errorf("run: %+v, want %d\n%s", res, ExitLeaseLost, recs)
	}
	stop := recs.of("stopping")
	if len(stop) != 1 {
		t.Fatalf("stopping records %+v\n%s", stop, recs)
	}
	if !strings.Contains(strings.Join(log.lines(t), "\n"), "sig=terminated") {
		t.Errorf("the command got no SIGTERM: %q", log.lines(t))
	}
	if at := stop[0].Time; !at.Before(*stop[0].ExpiresAt) {
		t.Errorf("stopped at %s, not before the expiry %s", at, stop[0].ExpiresAt)
	}
}

// TestDeniedStartsNothing: a deny exits ExitDenied with a DeniedError and
// never starts the command; with WaitForSlot it asks again until then.
func TestDeniedStartsNothing(t *testing.T) {
	t.Parallel()
	n := newNode(t, 0.001, "")
	c, recs, cfg, log := n.job()
	res, err := Run(context.Background(), cfg, c, n.admitter(c, "deny-1", 0))
	var de *DeniedError
	if res.Status != ExitDenied || !errorsAs(err, &de) || de.Decision.Reason.Code == "" {
		t.Errorf("run: %+v, %v; want status 3 and a DeniedError", res, err)
	}
	// Asks 200 ms apart, each a denial over NATS: 4 s leaves room for two
	// waits even when a loaded machine makes the first ask slow.
	cfg.WaitForSlot = 4 * time.Second
	res, err = Run(context.Background(), cfg, c, n.admitter(c, "deny-2", 0))
	if res.Status != ExitDenied || err == nil || len(recs.of("waiting")) < 2 {
		t.Errorf("with a wait: %+v, %v, %d waits; want 3 after at least two\n%s", res, err, len(recs.of("waiting")), recs)
	}
	if got := log.lines(t); len(got) != 0 {
		t.Errorf("the command ran: %q", got)
	}
}

// TestMissingCommand: a command that does not exist exits 127, as a shell
// says it, with the lease released.
func TestMissingCommand(t *testing.T) {
	t.Parallel()
	n := newNode(t, 100000, "")
	c, recs, cfg, _ := n.job()
	cfg.Command = []string{"/no/such/trainer"}
	res, err := Run(context.Background(), cfg, c, n.admitter(c, "missing-1", 0))
	if res.Status != 127 || err == nil {
		t.Errorf("run: %+v, %v; want 127 and the error", res, err)
	}
	if len(recs.of("released")) != 1 || len(leases(c)) != 0 {
		t.Errorf("the lease was not released:\n%s", recs)
	}
}

// launch runs cfg under a lease for job in the background and returns once
// its command is registered: done gets run's result, cancel stops it as a
// signal would (its cause: a SignalCause).
func (n *node) launch(t *testing.T, cfg Config, c *bus.Client, job string, leaseSeconds int, recs *records) (<-chan Result, context.CancelCauseFunc) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	done := make(chan Result, 1)
	go func() {
		res, _ := Run(ctx, cfg, c, n.admitter(c, job, leaseSeconds))
		done <- res
	}()
	waitFor(t, "registered", func() bool { return len(recs.of("registered")) == 1 })
	return done, cancel
}

// sidecarGoes runs job under a lease of seconds (its first term and every
// renewal alike), with a second's grace to stop, and takes the sidecar and
// its NATS server away once the command is registered.
func sidecarGoes(t *testing.T, job string, seconds int) (n *node, c *bus.Client, recs *records, log childLog, done <-chan Result, cancel context.CancelCauseFunc) {
	t.Helper()
	n = newNode(t, 100000, fmt.Sprintf("lease: {first_term: %[1]ds, default: %[1]ds}", seconds))
	c, recs, cfg, log := n.job()
	cfg.Grace = time.Second
	done, cancel = n.launch(t, cfg, c, job, seconds, recs)
	n.down()
	return n, c, recs, log, done, cancel
}

// throttling is a node whose SLO lets a job run at 100 %, with 30 s to
// restart after a throttle; tighten lowers the SLO (a hot reload) so that
// only a lower percentage fits.
func throttling(t *testing.T) (*node, func()) {
	p10, p100 := p99At(t, 10), p99At(t, 100)
	n := newNode(t, p100/0.9*1.05, "guard: {deadline: 30s}")
	return n, func() {
		n.slo = (p10 + p100) / 2 / 0.9
		n.write()
	}
}
