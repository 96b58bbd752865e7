package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/termtext"
	"github.com/colocd/colocd/launch"
	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/sidecar"
	"github.com/colocd/colocd/simserver"
)

// The demo's service and load: a real inference trace's kernels under an
// SLO of 200 ms that must hold at 12 requests a second (the configured
// rate); 8 arrive each second until the load rises to RiseRPS at
// riseAt after the start. The two jobs granted are admitted to the
// limit at 12 req/s, so a steady 13 needs less of them, whatever the
// forecast does. The SLO leaves room for the forecast's noise: the rate of
// each 5 s scrape, extrapolated 30 s ahead, overshoots a step by half of it
// (8 to 13 req/s reads about 18, more on a bad draw), and at their minimum
// both jobs fit up to about 24 req/s (the upper end of the p99 at 10 % and
// 5 % is 143 ms at 22 req/s, 180 ms at 25), so the guard throttles and does
// not revoke. (At 150 ms they did not, and a loaded machine revoked both.)
const (
	Service       = "chat"
	configuredRPS = 12
	RPS           = 8
	SLOMS         = 200
	RiseRPS       = 13
	riseAt        = 30 * time.Second
	// quietFor is how long the guard must stay quiet after a throttle for
	// the demo to end.
	quietFor = 15 * time.Second
)

// ask is one admission the demo's launcher sends, and the decision
// the scenario expects of it.
type ask struct {
	job, owner, what string
	minPct, maxPct   int
	memoryMiB        int
	lease            time.Duration
	want, wantCode   string
	// supervised: the job runs under colocd run (launch.Run), which
	// renews, restarts its worker on a throttle and releases at the end;
	// the others' launcher works by hand.
	supervised bool
}

// The script: what each launcher asks for, in order.
var asks = []ask{
	{job: "light-finetune", owner: "nlp", what: "a light fine-tuning job", minPct: 10, maxPct: 20, memoryMiB: 8 << 10, lease: 45 * time.Second,
		want: v1.DecisionGrant, wantCode: "fits"},
	{job: "huge-model", owner: "vision", what: "a job that needs more memory than is free", minPct: 5, maxPct: 20, memoryMiB: 136 << 10, lease: 10 * time.Minute,
		want: v1.DecisionDeny, wantCode: "insufficient_memory"},
	{job: "heavy-pretrain", owner: "research", what: "a heavy pre-training job, as much of the GPU as it can get", minPct: 5, maxPct: 100, memoryMiB: 40 << 10, lease: 10 * time.Minute,
		want: v1.DecisionThrottle, wantCode: "throttled_to_fit", supervised: true},
	{job: "greedy-sweep", owner: "research", what: "a job that will not run below half the GPU", minPct: 50, maxPct: 100, memoryMiB: 8 << 10, lease: 10 * time.Minute,
		want: v1.DecisionDeny, wantCode: "slo_violation"},
}

// Step is one entry of the account: --json prints them all.
type Step struct {
	AtSeconds   float64                `json:"at_s"`
	Kind        string                 `json:"kind"` // admit, guard, expire, load, status
	Job         string                 `json:"job,omitempty"`
	Asked       *v1.Compute            `json:"asked,omitempty"`
	MemoryMiB   int                    `json:"memory_mib,omitempty"`
	Decision    string                 `json:"decision,omitempty"`
	Pct         int                    `json:"pct,omitempty"`
	Reason      *v1.Reason             `json:"reason,omitempty"`
	Predictions []v1.ServicePrediction `json:"predictions,omitempty"`
	Event       *v1.Event              `json:"event,omitempty"`
	RateRPS     float64                `json:"rate_rps,omitempty"`
	PIDs        []int                  `json:"pids,omitempty"` // the workers it started or stopped
	Note        string                 `json:"note,omitempty"`
}

// Config is one run of the demo.
type Config struct {
	// Inference is the service's profile, Training every job's.
	Inference, Training string
	// Out gets the account as it goes, unless Quiet; Log gets the tail of
	// the sidecar's log when the demo fails, unless Interrupted (nil: never)
	// says the user stopped it.
	Out, Log    io.Writer
	Quiet       bool
	Interrupted func() bool
	// Version is the sidecar's.
	Version string
}

// Run plays the scenario until it ends or ctx does, and returns its steps
// (those taken so far when it fails). It stops every process it started
// and removes every file it made.
func Run(ctx context.Context, cfg Config) ([]Step, error) {
	d := &scenario{out: cmp.Or[io.Writer](cfg.Out, io.Discard), errOut: cmp.Or[io.Writer](cfg.Log, io.Discard), quiet: cfg.Quiet,
		version: cfg.Version, start: time.Now(), interrupted: cfg.Interrupted}
	if d.interrupted == nil {
		d.interrupted = func() bool { return false }
	}
	err := d.run(ctx, cfg.Inference, cfg.Training)
	return d.steps, err
}

// scenario is one run of the demo.
type scenario struct {
	out io.Writer
	// errOut gets the tail of the sidecar's log when the demo fails.
	errOut io.Writer
	// interrupted reports a signal from the user: no log tail then.
	interrupted func() bool
	quiet       bool
	version     string
	start       time.Time
	steps       []Step

	client  *bus.Client
	id      string
	workers workerSet

	// The supervised job: what colocd run reported, the pid of its
	// worker now, and how to stop it and wait for it.
	runRecs  chan launch.Record
	runPID   int
	runLease string
	stopRun  func()
}

// say records a step and, unless quiet, prints it: the first line after
// the time, the rest indented under it.
func (d *scenario) say(st Step, lines ...string) {
	st.AtSeconds = time.Since(d.start).Round(100 * time.Millisecond).Seconds()
	d.steps = append(d.steps, st)
	if d.quiet {
		return
	}
	for i, l := range lines {
		if i == 0 {
			fmt.Fprintf(d.out, "[%5.1fs] %s\n", st.AtSeconds, l)
		} else {
			fmt.Fprintf(d.out, "         %s\n", l)
		}
	}
}

func (d *scenario) run(ctx context.Context, infPath, trainPath string) (err error) {
	inf, err := predictor.LoadProfile(infPath)
	if err != nil {
		return fmt.Errorf("demo: --inference: %w (run it from the repository's root, or give the path)", err)
	}
	tr, err := predictor.LoadProfile(trainPath)
	if err != nil {
		return fmt.Errorf("demo: --training: %w (run it from the repository's root, or give the path)", err)
	}
	trainJSON, err := os.ReadFile(trainPath)
	if err != nil {
		return fmt.Errorf("demo: --training: %w", err)
	}
	dir, err := os.MkdirTemp("", "colocd-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)
	defer d.workers.stopAll()

	// The simulated inference server, with the jobs the sidecar's status
	// shows running.
	jobs := &simserver.Jobs{}
	srvURL, stopSrv, err := d.startServer(inf, jobs)
	if err != nil {
		return err
	}
	defer stopSrv()

	cfg, err := sidecarConfig(dir, infPath, srvURL)
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "sidecar.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer logFile.Close()
	defer func() {
		if err != nil && !d.interrupted() {
			d.logTail(logPath)
		}
	}()
	s, err := sidecar.New(ctx, cfg, sidecar.Options{Logger: slog.New(slog.NewTextHandler(logFile, nil)), Version: d.version})
	if err != nil {
		return fmt.Errorf("demo: the sidecar: %w", err)
	}
	// A sidecar that stops by itself ends the demo with its error.
	ctx, stopDemo := context.WithCancelCause(ctx)
	defer stopDemo(nil)
	runCtx, stopSidecar := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		rerr := s.Run(runCtx)
		if runCtx.Err() == nil {
			stopDemo(fmt.Errorf("the sidecar stopped: %v", rerr))
		}
		done <- rerr
	}()
	defer func() {
		stopSidecar()
		if rerr := <-done; rerr != nil && err == nil {
			err = fmt.Errorf("demo: the sidecar: %w", rerr)
		}
	}()

	nc, err := bus.Connect(s.ClientURL(), bus.ConnectOptions{Name: "colocd demo launcher", NKeySeedFile: s.LauncherNKeyFile(), Policy: bus.StayConnected})
	if err != nil {
		return fmt.Errorf("demo: connect: %w", err)
	}
	defer nc.Close()
	d.client, d.id = bus.NewClient(nc, bus.WithTimeout(30*time.Second)), s.ID()
	defer func() { // before the connection and the sidecar go
		if d.stopRun != nil {
			d.stopRun() // colocd run stops its worker and releases its lease
		}
	}()

	var followers sync.WaitGroup
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer func() { stopFollowing(); followers.Wait() }()
	followers.Go(func() {
		jobs.Follow(followCtx, 500*time.Millisecond, func(ctx context.Context) ([]simserver.Trainer, error) {
			st, err := d.client.Status(ctx, d.id)
			if err != nil {
				return nil, err
			}
			return simserver.TrainersOf(st, tr), nil
		}, io.Discard)
	})

	d.intro(cfg)
	if err := d.waitObserved(ctx, cfg.Services[0].Metrics.Window); err != nil {
		return err
	}
	leases := map[string]*v1.Lease{}
	for _, a := range asks {
		l, err := d.admit(ctx, a, trainJSON)
		if err != nil {
			return err
		}
		if l != nil {
			leases[a.job] = l
		}
	}
	heavy, light := leases["heavy-pretrain"], leases["light-finetune"]
	if heavy == nil || light == nil {
		return errors.New("demo: the light and the heavy job were not both admitted; the account above says why")
	}
	return d.watch(ctx, heavy, light)
}

// logTail copies the last lines of the sidecar's log to errOut.
func (d *scenario) logTail(path string) {
	raw, err := os.ReadFile(path)
	if err != nil || len(raw) == 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	fmt.Fprintln(d.errOut, "the sidecar's log, to the end:")
	for _, l := range lines[max(0, len(lines)-20):] {
		fmt.Fprintln(d.errOut, "  "+l)
	}
}

// startServer serves the simulated inference server's vLLM metrics page
// on a free port: RPS requests a second, RiseRPS after riseAt.
func (d *scenario) startServer(inf *predictor.Profile, jobs *simserver.Jobs) (string, func(), error) {
	cal, err := predictor.ResolveCalibration("", "NVIDIA H200")
	if err != nil {
		return "", nil, fmt.Errorf("demo: %w", err)
	}
	arrivals := simserver.Poisson(RPS, riseAt, 1)
	for _, a := range simserver.Poisson(RiseRPS, time.Hour, 2) {
		arrivals = append(arrivals, riseAt+a)
	}
	srv, err := simserver.New(simserver.Config{Preset: "vllm", ModelName: Service, Arrivals: arrivals, Start: d.start,
		Latency:  &simserver.Model{Inference: inf, Calibration: cal, Mode: predictor.ModeMPS, Requests: 1000, Seed: 1, SMs: cal.Device.SMs},
		Trainers: jobs.Now, Seed: 1})
	if err != nil {
		return "", nil, fmt.Errorf("demo: the simulated server: %w", err)
	}
	hs, addr, _, err := simserver.Listen("127.0.0.1:0", srv)
	if err != nil {
		return "", nil, fmt.Errorf("demo: the simulated server: %w", err)
	}
	return "http://" + addr.String() + "/metrics", func() { hs.Close() }, nil
}

// sidecarConfig is the sidecar's configuration: everything under dir, ports
// the kernel picks, a simulated H200 and MPS daemon, and the one service
// watched through its metrics page.
func sidecarConfig(dir, infPath, metricsURL string) (*configs.Config, error) {
	prof, err := filepath.Abs(infPath)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	c := configs.Default()
	c.Sidecar.ID = "demo-gpu"
	c.Sidecar.DataDir = filepath.Join(dir, "data")
	c.NATS.Listen = "127.0.0.1:0"
	c.GPU.Backend = configs.BackendSim
	c.MPS.Control = "sim"
	c.MPS.PipeDir = filepath.Join(dir, "mps-pipe")
	c.MPS.LogDir = filepath.Join(dir, "mps-log")
	c.Telemetry.HTTP = "127.0.0.1:0"
	c.Services = []configs.Service{{Name: Service, Profile: prof, RateRPS: configuredRPS, SLO: configs.SLO{P99MS: SLOMS},
		Metrics: observe.Endpoint{URL: metricsURL, Preset: "vllm", Interval: 5 * time.Second, Window: 15 * time.Second}}}
	c.Admission.Lease.FirstTerm = 20 * time.Second
	c.Admission.Guard.Deadline = 15 * time.Second
	// The simulated server's latency is drawn from colocd's own prediction,
	// so a first measurement has nothing to correct: the script's jobs are
	// granted what the prediction allows at once (docs/guard.md, the first
	// grant).
	c.Admission.Guard.GrantBeforeMeasured = true
	// The script shows decisions, not their deadline: a decision that takes
	// longer than the default 5 s on a busy machine (the heavy job's search
	// over every percentage) is still waited for, as long as the client's
	// 30 s.
	c.Admission.DecisionTimeout = 30 * time.Second
	for _, d := range []string{c.Sidecar.DataDir, c.MPS.PipeDir, c.MPS.LogDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("demo: the configuration: %w", err)
	}
	return &c, nil
}

func (d *scenario) intro(cfg *configs.Config) {
	limit := SLOMS * (1 - cfg.Admission.Headroom)
	d.say(Step{Kind: "start", Note: "sidecar " + cfg.Sidecar.ID},
		fmt.Sprintf("sidecar %s on a simulated NVIDIA H200, MPS, with an embedded NATS server", cfg.Sidecar.ID),
		fmt.Sprintf("service %q: SLO p99 %d ms at up to %d requests a second (%d arrive now); every decision holds", Service, SLOMS, configuredRPS, RPS),
		"its predicted p99 (or the server's own, when that is higher) at the higher of the configured and the observed rate,",
		fmt.Sprintf("the upper end of its %.0f %% interval, to %.0f ms, the SLO less %.0f %% headroom", cfg.Predictor.Confidence*100, limit, cfg.Admission.Headroom*100))
}

// waitObserved waits until the sidecar has read the server's metrics once.
func (d *scenario) waitObserved(ctx context.Context, window time.Duration) error {
	d.say(Step{Kind: "wait"}, fmt.Sprintf("the sidecar scrapes the simulated server's /metrics; waiting for a full %s window...", window))
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := d.client.Status(ctx, d.id)
		if err == nil && len(st.Services) == 1 {
			if o := st.Services[0].Observed; o != nil && o.State == string(observe.StateFresh) && o.RateRPS != nil && o.WindowSeconds >= window.Seconds() {
				d.say(Step{Kind: "load", RateRPS: *o.RateRPS},
					fmt.Sprintf("the sidecar reads the server's /metrics: %.1f requests a second over %.0f s (%s forecast 30 s ahead), p99 %s ms with nothing beside it", *o.RateRPS, o.WindowSeconds, termtext.Num(o.ForecastRPS), termtext.Num(o.P99MS)))
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: waiting for the sidecar to read the simulated server's metrics: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}

// admit sends one ask and prints the decision; a granted job's worker
// starts with the lease's environment and is registered.
func (d *scenario) admit(ctx context.Context, a ask, profile []byte) (*v1.Lease, error) {
	req := &v1.AdmitRequest{Job: v1.Job{ID: a.job, Owner: a.owner}, Profile: profile, MemoryMiB: a.memoryMiB, Processes: 1,
		Compute: v1.Compute{MinPct: a.minPct, MaxPct: a.maxPct}, LeaseSeconds: int(a.lease.Seconds()), Checkpointable: true}
	dec, err := d.client.Admit(ctx, d.id, req)
	if err != nil {
		return nil, fmt.Errorf("demo: admit %s: %w", a.job, launch.Describe(err))
	}
	lines := []string{fmt.Sprintf("%s asks for %d-%d %% of the GPU's threads and %d GiB: %s", a.job, a.minPct, a.maxPct, a.memoryMiB>>10, a.what)}
	for _, p := range dec.Predictions {
		lines = append(lines, "  "+predictionLine(p))
	}
	verdict := strings.ToUpper(dec.Decision)
	if dec.ActiveThreadPct > 0 {
		verdict += fmt.Sprintf(" at %d %%", dec.ActiveThreadPct)
	}
	lines = append(lines, fmt.Sprintf("  -> %s (%s): %s", verdict, dec.Reason.Code, termtext.Line(dec.Reason.Message)))
	if j := dec.Joint; j != nil {
		for _, jj := range j.Jobs {
			if jj.LeaseID != "" && jj.Pct != jj.WasPct {
				lines = append(lines, fmt.Sprintf("     and lowers %s from %d %% to %d %% to make room (joint allocation)", jj.JobID, jj.WasPct, jj.Pct))
			}
		}
	}
	st := Step{Kind: "admit", Job: a.job, Asked: &req.Compute, MemoryMiB: a.memoryMiB, Decision: dec.Decision, Pct: dec.ActiveThreadPct, Reason: &dec.Reason, Predictions: dec.Predictions}
	if dec.Decision != a.want || dec.Reason.Code != a.wantCode {
		d.say(st, lines...)
		if dec.Lease != nil { // not the scenario's: give it back
			_ = d.client.Release(ctx, d.id, &v1.LeaseRef{LeaseID: dec.Lease.ID, Token: dec.Lease.Token})
		}
		return nil, fmt.Errorf("demo: %s: decided %s (%s), the scenario expects %s (%s)", a.job, dec.Decision, dec.Reason.Code, a.want, a.wantCode)
	}
	if dec.Lease == nil {
		d.say(st, lines...)
		return nil, nil
	}
	if a.supervised {
		pid, err := d.supervise(ctx, dec)
		if err != nil {
			return nil, err
		}
		st.PIDs = []int{pid}
		lines = append(lines, fmt.Sprintf("     colocd run starts its worker (pid %d) with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s, registers it and renews the lease (%s)",
			pid, dec.Lease.Env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], a.lease))
		d.say(st, lines...)
		return dec.Lease, nil
	}
	pid, err := d.workers.start(a.job, dec.Lease.Env)
	if err != nil {
		return nil, fmt.Errorf("demo: %s's worker: %w", a.job, err)
	}
	st.PIDs = []int{pid}
	if err := d.client.Register(ctx, d.id, &v1.RegisterRequest{LeaseID: dec.Lease.ID, Token: dec.Lease.Token, PIDs: []int{pid}}); err != nil {
		return nil, fmt.Errorf("demo: register %s: %w", a.job, launch.Describe(err))
	}
	lines = append(lines, fmt.Sprintf("     its worker (pid %d) starts with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s and is registered; lease for %s",
		pid, dec.Lease.Env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], a.lease))
	d.say(st, lines...)
	return dec.Lease, nil
}

// predictionLine is one service's prediction against its limit.
func predictionLine(p v1.ServicePrediction) string {
	s := fmt.Sprintf("%s: p99 solo %.1f ms, predicted %.1f ms", p.Service, p.SoloP99MS, p.PredictedP99MS)
	if p.PredictedP99UpperMS > p.PredictedP99MS {
		s += fmt.Sprintf(" (up to %.1f)", p.PredictedP99UpperMS)
	}
	if p.Correction > 1 {
		s += fmt.Sprintf(" x %.2f observed correction", p.Correction)
	}
	return s + fmt.Sprintf(" at %.1f req/s, SLO %.0f ms", p.RateRPS, p.SLOP99MS)
}

// watch follows both jobs' events as the load rises: both launchers
// honour every throttle (restart the worker at the new percentage and
// register it); the heavy job's renews its lease, the light job's lets it
// run out. It ends quietFor after the guard's last throttle once the light
// lease has ended, or once both leases have.
func (d *scenario) watch(ctx context.Context, heavy, light *v1.Lease) error {
	subs := map[string]*bus.EventSubscription{}
	for _, l := range []*v1.Lease{heavy, light} {
		sub, err := d.client.Events(ctx, d.id, l.JobID, 1)
		if err != nil {
			return fmt.Errorf("demo: events of %s: %w", l.JobID, launch.Describe(err))
		}
		defer sub.Stop()
		subs[l.JobID] = sub
	}
	d.say(Step{Kind: "wait", Job: light.JobID}, fmt.Sprintf("%s's launcher will not renew its lease; %s's (colocd run) renews it", light.JobID, heavy.JobID))
	renew := time.NewTicker(20 * time.Second)
	defer renew.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	rise := time.NewTimer(time.Until(d.start.Add(riseAt)))
	defer rise.Stop()
	var lastThrottle time.Time
	throttled, lightDone, heavyDone, seen := false, false, false, false
	// follow handles what l's subscription delivered (ok false: it ended)
	// and sets *done once l's lease is gone.
	follow := func(l *v1.Lease, rec bus.EventRecord, ok bool, done *bool) error {
		if !ok {
			return fmt.Errorf("demo: the events of %s ended: %w", l.JobID, errors.Join(subs[l.JobID].Err(), context.Cause(ctx)))
		}
		if err := d.event(ctx, rec.Event, l); err != nil {
			return err
		}
		throttled, lastThrottle = throttledBy(rec.Event, throttled, lastThrottle)
		*done = *done || ended(rec.Event)
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: waiting for the guard (throttled: %v) and the light lease's end (%v): %w", throttled, lightDone, context.Cause(ctx))
		case <-rise.C:
			d.say(Step{Kind: "load", RateRPS: RiseRPS}, fmt.Sprintf("the server's load rises: %d requests a second arrive from now on", RiseRPS))
		case <-renew.C:
			if heavyDone || heavy.ID == d.runLease { // colocd run renews its own
				continue
			}
			if _, err := d.client.Renew(ctx, d.id, &v1.LeaseRef{LeaseID: heavy.ID, Token: heavy.Token}); err != nil {
				return fmt.Errorf("demo: renew %s: %w", heavy.JobID, launch.Describe(err))
			}
		case <-poll.C:
			if throttled && lightDone && time.Since(lastThrottle) >= quietFor {
				return d.final(ctx)
			}
			if seen || time.Since(d.start) < riseAt {
				continue
			}
			st, err := d.client.Status(ctx, d.id)
			if err != nil || len(st.Services) != 1 || st.Services[0].Observed == nil || st.Services[0].Observed.RateRPS == nil {
				continue
			}
			if svc := st.Services[0]; *svc.Observed.RateRPS > configuredRPS {
				seen = true
				d.say(Step{Kind: "load", RateRPS: *svc.Observed.RateRPS},
					fmt.Sprintf("the server's /metrics show %.1f requests a second (%s forecast 30 s ahead), above the configured %d:",
						*svc.Observed.RateRPS, termtext.Num(svc.Observed.ForecastRPS), configuredRPS),
					fmt.Sprintf("  the sidecar now predicts at %.1f req/s: p99 %.1f ms with the leases as they run", svc.PredictedAtRPS, svc.PredictedP99MS))
			}
		case rec, ok := <-subs[heavy.JobID].C():
			if err := follow(heavy, rec, ok, &heavyDone); err != nil {
				return err
			}
		case rec, ok := <-subs[light.JobID].C():
			if err := follow(light, rec, ok, &lightDone); err != nil {
				return err
			}
		}
		if heavyDone && lightDone {
			return d.final(ctx)
		}
	}
}

// throttledBy notes a throttle by the guard: one with a deadline, which
// the launcher answers with a restart.
func throttledBy(ev v1.Event, throttled bool, last time.Time) (bool, time.Time) {
	if ev.Type == v1.EventThrottle && ev.Deadline != nil {
		return true, time.Now()
	}
	return throttled, last
}

// ended reports an event after which the lease is gone.
func ended(ev v1.Event) bool { return ev.Type == v1.EventExpire || ev.Type == v1.EventRevoke }

// event prints one event and does what the launcher does with it.
func (d *scenario) event(ctx context.Context, ev v1.Event, l *v1.Lease) error {
	st := Step{Kind: "guard", Job: ev.JobID, Pct: ev.ActiveThreadPct, Event: &ev}
	switch ev.Type {
	case v1.EventThrottle:
		lines := []string{fmt.Sprintf("guard: THROTTLE %s to %d %%: %s", ev.JobID, ev.ActiveThreadPct, termtext.Line(ev.Reason))}
		if ev.Deadline != nil && d.runRecs != nil && l.ID == d.runLease {
			old := d.runPID
			rec, err := d.awaitRestart(ctx, ev)
			if err != nil {
				return err
			}
			st.PIDs = []int{old, d.runPID}
			lines = append(lines, fmt.Sprintf("  colocd run restarts the worker at %d %% (pid %d -> %d) and registers it, %.1f s after the event, within the %s deadline",
				ev.ActiveThreadPct, old, d.runPID, *rec.Seconds, ev.Deadline.Sub(ev.Time).Round(time.Second)))
		} else if ev.Deadline != nil {
			old := d.workers.pid(ev.JobID)
			pid, err := d.workers.restart(ev.JobID, ev.Env)
			if err != nil {
				return fmt.Errorf("demo: %s's worker: %w", ev.JobID, err)
			}
			err = d.client.Register(ctx, d.id, &v1.RegisterRequest{LeaseID: l.ID, Token: l.Token, PIDs: []int{pid}})
			if v1.CodeOf(err) == v1.CodeNotFound {
				// The light job's lease, never renewed, expired between the
				// throttle and the restart (a busy machine stretches the
				// script): its expire event follows; the worker stops.
				d.workers.stop(ev.JobID)
				st.PIDs = []int{old}
				d.say(st, lines[0], "  the launcher restarts the worker, but the lease expired meanwhile (it was never renewed): the worker stops")
				return nil
			}
			if err != nil {
				return fmt.Errorf("demo: register %s: %w", ev.JobID, launch.Describe(err))
			}
			st.PIDs = []int{old, pid}
			lines = append(lines, fmt.Sprintf("  the launcher restarts the worker from its checkpoint at %d %% (pid %d -> %d) and registers it, within the %s deadline",
				ev.ActiveThreadPct, old, pid, ev.Deadline.Sub(ev.Time).Round(time.Second)))
		}
		d.say(st, lines...)
		return nil
	case v1.EventRevoke:
		st.PIDs = []int{d.workers.pid(ev.JobID)}
		d.say(st, fmt.Sprintf("guard: REVOKE %s: %s", ev.JobID, termtext.Line(ev.Reason)), "  the launcher stops the worker")
		d.workers.stop(ev.JobID)
		return nil
	case v1.EventExpire:
		st.Kind = "expire"
		pid := d.workers.pid(ev.JobID)
		d.workers.stop(ev.JobID)
		st.PIDs = []int{pid}
		d.say(st, fmt.Sprintf("EXPIRE %s: %s", ev.JobID, termtext.Line(ev.Reason)),
			fmt.Sprintf("  the sidecar ended its MPS client (terminate_client) and freed its %d %%; the launcher stops the worker (pid %d)", ev.ActiveThreadPct, pid))
		return nil
	case v1.EventRaise:
		d.say(st, fmt.Sprintf("raise offered to %s: %d %% (%s); the launcher keeps its percentage", ev.JobID, ev.ActiveThreadPct, termtext.Line(ev.Reason)))
	}
	return nil
}

// final prints the sidecar's status as the scenario ends.
func (d *scenario) final(ctx context.Context) error {
	st, err := d.client.Status(ctx, d.id)
	if err != nil {
		return fmt.Errorf("demo: status: %w", launch.Describe(err))
	}
	lines := []string{"colocd status at the end:"}
	for _, s := range st.Services {
		obs := "-"
		if s.Observed != nil && s.Observed.P99MS != nil {
			obs = fmt.Sprintf("%.1f ms at %s req/s", *s.Observed.P99MS, termtext.Num(s.Observed.RateRPS))
		}
		lines = append(lines, fmt.Sprintf("  %s: predicted p99 %.1f ms at %.1f req/s, observed %s, SLO %.0f ms (guard: %s)", s.Name, s.PredictedP99MS, s.PredictedAtRPS, obs, s.SLOP99MS, s.Guard))
	}
	for _, l := range st.Leases {
		lines = append(lines, fmt.Sprintf("  lease %s: %s at %d %%, pids %v", l.ID, l.JobID, l.ActiveThreadPct, l.PIDs))
	}
	d.say(Step{Kind: "status"}, lines...)
	return nil
}

// workerSet are the demo's stand-ins for training processes: real
// processes that sleep, started with a lease's environment, that the
// sidecar can see and stop.
type workerSet struct {
	mu   sync.Mutex
	byJb map[string]*worker
}

type worker struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (w *workerSet) start(job string, env map[string]string) (int, error) {
	c := exec.Command("sleep", "3600")
	// Should colocd itself be killed, its workers go with it.
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.Env = os.Environ()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c.Env = append(c.Env, k+"="+env[k])
	}
	if err := c.Start(); err != nil {
		return 0, err
	}
	wk := &worker{cmd: c, done: make(chan struct{})}
	go func() { c.Wait(); close(wk.done) }() // a stopped worker's status is not news
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byJb == nil {
		w.byJb = map[string]*worker{}
	}
	w.byJb[job] = wk
	return c.Process.Pid, nil
}

func (w *workerSet) get(job string) *worker {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byJb[job]
}

func (w *workerSet) pid(job string) int {
	if wk := w.get(job); wk != nil {
		return wk.cmd.Process.Pid
	}
	return 0
}

// restart stops the job's worker and starts another with env.
func (w *workerSet) restart(job string, env map[string]string) (int, error) {
	w.stop(job)
	return w.start(job, env)
}

func (w *workerSet) stop(job string) {
	if wk := w.get(job); wk != nil {
		_ = wk.cmd.Process.Signal(syscall.SIGTERM) // it may be gone already
		<-wk.done
	}
}

func (w *workerSet) stopAll() {
	w.mu.Lock()
	jobs := make([]string, 0, len(w.byJb))
	for j := range w.byJb {
		jobs = append(jobs, j)
	}
	w.mu.Unlock()
	for _, j := range jobs {
		w.stop(j)
	}
}

// supervise runs the granted job under launch.Run, colocd run's
// supervisor: its worker is a sleep that it starts, registers, renews and
// restarts on a throttle. It returns the worker's pid once registered.
func (d *scenario) supervise(ctx context.Context, dec *v1.Decision) (int, error) {
	d.runRecs = make(chan launch.Record, 256)
	d.runLease = dec.Lease.ID
	granted := false
	admit := func(context.Context) (*launch.Grant, error) {
		if granted { // the scenario has one lease; no readmit
			return nil, errors.New("demo: one lease only")
		}
		granted = true
		return &launch.Grant{Sidecar: d.id, Decision: dec}, nil
	}
	cfg := launch.Config{Command: []string{"sleep", "3600"}, Env: os.Environ(), Grace: 5 * time.Second, Processes: 1,
		OnRecord: func(r launch.Record) {
			select {
			case d.runRecs <- r:
			default: // never that many unread; run must not wait on the demo
			}
		}}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = launch.Run(rctx, cfg, d.client, admit)
	}()
	d.stopRun = func() { cancel(); <-done }
	for {
		select {
		case r := <-d.runRecs:
			if r.Event == "started" && len(r.PIDs) > 0 {
				d.runPID = r.PIDs[0]
			}
			if r.Event == "registered" {
				return d.runPID, nil
			}
			if r.Event == "register_failed" || r.Event == "start_failed" {
				return 0, fmt.Errorf("demo: colocd run: %s", r.Message)
			}
		case <-done:
			return 0, errors.New("demo: colocd run ended before its worker was registered")
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// awaitRestart waits for colocd run to restart the supervised worker at a
// throttle's percentage (it has registered the new worker by then).
func (d *scenario) awaitRestart(ctx context.Context, ev v1.Event) (launch.Record, error) {
	t := time.NewTimer(time.Until(*ev.Deadline))
	defer t.Stop()
	for {
		select {
		case r := <-d.runRecs:
			if r.Event == "started" && len(r.PIDs) > 0 {
				d.runPID = r.PIDs[0]
			}
			if r.Event == "restarted" && r.Pct == ev.ActiveThreadPct && r.Seconds != nil {
				return r, nil
			}
		case <-t.C:
			return launch.Record{}, fmt.Errorf("demo: colocd run did not restart %s's worker at %d %% by the deadline", ev.JobID, ev.ActiveThreadPct)
		case <-ctx.Done():
			return launch.Record{}, context.Cause(ctx)
		}
	}
}
