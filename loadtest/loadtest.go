package loadtest

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/termtext"
	"github.com/colocd/colocd/launch"
	"github.com/colocd/colocd/mps"
	"github.com/colocd/colocd/sidecar"
	"github.com/nats-io/nats.go"
)

// pingSubject is the baseline round trip: micro's discovery PING, answered
// by the NATS micro library on the sidecar's own connection without any
// colocd code, on a subject every launcher may publish to.
const pingSubject = "$SRV.PING." + v1.ServiceName

// Operation kinds of a load test, in report order.
const (
	opPing    = "ping"
	opAdmit   = "admit"
	opRenew   = "renew"
	opRelease = "release"
	opStatus  = "status"
)

var loadOps = []string{opPing, opAdmit, opRenew, opRelease, opStatus}

// Config is one load test: the launchers, how long they load, what every
// admit asks for, and the sidecar: Endpoint's, or with Embedded one
// started in this process.
type Config struct {
	// Endpoint is the sidecar the launchers connect to; with Embedded only
	// its Timeout is read (how long each call and the sidecar's start may
	// take).
	Endpoint launch.Endpoint
	// Launchers each loop over cycles on their own connection, until
	// Duration has passed (a cycle under way finishes).
	Launchers int
	Duration  time.Duration
	// Profile is the training profile every admit sends, SendProfile how
	// (launch.SendAuto, SendInline or SendRef), MemoryMiB the memory it
	// asks for.
	Profile     string
	SendProfile string
	MemoryMiB   int
	// MaxJobs is, with Embedded, the sidecar's admission.max_jobs (0: the
	// default); otherwise the bound the sampled leases are checked against
	// (0: not checked).
	MaxJobs int
	// Embedded starts an in-process sidecar on a simulated H200 with an
	// embedded NATS server on a loopback port, and one inference service
	// of ServiceProfile whose SLO no job breaks, so that max_jobs is what
	// denies. DecisionTimeout is its admission.decision_timeout (0: the
	// default), Version its version, Log where its warnings go (nil:
	// nowhere).
	Embedded        bool
	ServiceProfile  string
	DecisionTimeout time.Duration
	Version         string
	Log             io.Writer
}

// Check validates the figures, before anything connects. Its errors name
// the flags of colocd loadtest.
func (f *Config) Check() error {
	switch {
	case f.Launchers < 1 || f.Launchers > 10000:
		return fmt.Errorf("--launchers: want 1 to 10000, got %d", f.Launchers)
	case f.Duration <= 0:
		return fmt.Errorf("--duration: want > 0, got %s", f.Duration)
	case f.MemoryMiB < 0:
		return fmt.Errorf("--memory-mib: want ≥ 0, got %d", f.MemoryMiB)
	case f.MaxJobs < 0:
		return fmt.Errorf("--max-jobs: want ≥ 0, got %d", f.MaxJobs)
	case f.DecisionTimeout != 0 && (f.DecisionTimeout < time.Second || f.DecisionTimeout > 10*time.Minute):
		return fmt.Errorf("--decision-timeout: want 1s to 10m, got %s", f.DecisionTimeout)
	case f.DecisionTimeout != 0 && !f.Embedded:
		return fmt.Errorf("--decision-timeout: want --embedded (an external sidecar has its own admission.decision_timeout)")
	}
	return nil
}

// Report is what a load test measured; --json prints it as is.
type Report struct {
	Sidecar     string  `json:"sidecar"`
	Target      string  `json:"target"` // "embedded" or "external"
	Server      string  `json:"server"`
	Launchers   int     `json:"launchers"`
	DurationS   float64 `json:"duration_s"` // measured, until the last cycle ended
	Cycles      int     `json:"cycles"`
	Admits      int     `json:"admits"`
	AdmitsPerS  float64 `json:"admits_per_s"`
	CyclesPerS  float64 `json:"cycles_per_s"`
	ProfileSize int     `json:"profile_bytes"`
	// ProfileSent is "inline" or "ref" (uploaded once, before the load).
	ProfileSent string `json:"profile_sent"`
	// Outcomes counts the admits' decisions (grant, throttle, deny);
	// DenyCodes the deny reasons.
	Outcomes  map[string]int `json:"outcomes"`
	DenyCodes map[string]int `json:"deny_codes"`
	// Errors counts failed calls; ErrorsByCode by "op code" (an API code,
	// no_sidecar, no_responders, timeout, bad_answer, other).
	Errors       int            `json:"errors"`
	ErrorsByCode map[string]int `json:"errors_by_code"`
	FirstErrors  []string       `json:"first_errors,omitempty"` // the first message of each op and code
	Ops          []OpStats      `json:"ops"`
	Baseline     string         `json:"baseline"`
	Leases       LeaseStats     `json:"leases"`
	Process      *ProcessStats  `json:"process,omitempty"`
	// Failures are why the command exits 1 (none: it passed).
	Failures []string `json:"failures,omitempty"`
}

// OpStats are the round trips of one operation kind.
type OpStats struct {
	Op     string  `json:"op"`
	Count  int     `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	// P50OverPing is P50MS over the ping's p50 in the same run.
	P50OverPing float64 `json:"p50_over_ping"`
}

// LeaseStats are the sidecar's live leases as the status sampler saw them.
type LeaseStats struct {
	MaxLive int `json:"max_live"`
	MaxJobs int `json:"max_jobs"` // 0: unknown, not checked
	Samples int `json:"samples"`
	// LeftAfter counts this run's leases still live after every launcher
	// stopped (each releases what it was granted).
	LeftAfter int `json:"left_after"`
}

// ProcessStats are the embedded sidecar's process before the launchers
// connect and after they disconnected, each after a GC that returns freed
// memory to the OS. The launchers run in the same process.
type ProcessStats struct {
	RSSBeforeMiB     *float64 `json:"rss_before_mib"` // null: unavailable
	RSSAfterMiB      *float64 `json:"rss_after_mib"`
	RSSNote          string   `json:"rss_note"`
	HeapBeforeMiB    float64  `json:"heap_before_mib"`
	HeapAfterMiB     float64  `json:"heap_after_mib"`
	GoroutinesBefore int      `json:"goroutines_before"`
	GoroutinesAfter  int      `json:"goroutines_after"`
}

// tally is what one goroutine (a launcher, the sampler) counted; merged at
// the end, so no lock is taken while the load runs.
type tally struct {
	lat       map[string][]time.Duration
	outcomes  map[string]int
	denyCodes map[string]int
	errs      map[string]int
	firstErr  map[string]string // the first message of each "op code"
	cycles    int
}

func newTally() *tally {
	return &tally{lat: map[string][]time.Duration{}, outcomes: map[string]int{}, denyCodes: map[string]int{}, errs: map[string]int{}, firstErr: map[string]string{}}
}

func (t *tally) record(op string, d time.Duration, err error) {
	if err == nil {
		t.lat[op] = append(t.lat[op], d)
		return
	}
	t.fail(op, errorCode(err), err)
}

func (t *tally) fail(op, code string, err error) {
	key := op + " " + code
	t.errs[key]++
	if _, ok := t.firstErr[key]; !ok {
		t.firstErr[key] = err.Error()
	}
}

func (t *tally) merge(o *tally) {
	for k, v := range o.lat {
		t.lat[k] = append(t.lat[k], v...)
	}
	for _, m := range [][2]map[string]int{{t.outcomes, o.outcomes}, {t.denyCodes, o.denyCodes}, {t.errs, o.errs}} {
		for k, v := range m[1] {
			m[0][k] += v
		}
	}
	for k, e := range o.firstErr {
		if _, ok := t.firstErr[k]; !ok {
			t.firstErr[k] = e
		}
	}
	t.cycles += o.cycles
}

// errorCode names an error's kind for the report.
func errorCode(err error) string {
	var be *v1.Error
	switch {
	case errors.As(err, &be):
		return strconv.Itoa(be.Code)
	case errors.Is(err, v1.ErrNoSidecar):
		return "no_sidecar"
	case errors.Is(err, nats.ErrNoResponders):
		return "no_responders"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "timeout"
	case errors.Is(err, errBadAnswer):
		return "bad_answer"
	}
	return "other"
}

var errBadAnswer = errors.New("bad answer")

// loadtest is one run: the target, the request every admit starts from,
// and the connection flags the launchers use.
type loadtest struct {
	cfg *Config
	ep  launch.Endpoint // the resolved connection (embedded: the sidecar's)
	// seeds, with --embedded, are one identity's seed file per launcher
	// (the sampler takes the default's): each gets its own fair share, as
	// launchers of different jobs would.
	seeds     []string
	req       v1.AdmitRequest
	jobPrefix string
}

// Run starts the embedded sidecar if asked, runs the load and returns the
// report; an error means the test could not run at all. The report's
// Failures say whether the sidecar passed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	f := &cfg
	lt := &loadtest{cfg: f, ep: f.Endpoint, jobPrefix: "lt-" + strings.ToLower(rand.Text()[:8])}
	lt.req = v1.AdmitRequest{Job: v1.Job{ID: lt.jobPrefix, Owner: "loadtest"}, MemoryMiB: f.MemoryMiB, Processes: 1,
		Compute: v1.Compute{MinPct: 10, MaxPct: 100}}
	if err := launch.FillRequest(&lt.req, f.Profile, 0, f.SendProfile); err != nil {
		return nil, err
	}
	lt.req.RequestID = "" // Admit draws one per cycle
	rep := &Report{Target: "external", Launchers: f.Launchers, ProfileSize: len(lt.req.Profile), Baseline: pingSubject + " round trip (answered by the NATS micro library, no colocd code)"}
	rep.Leases.MaxJobs = f.MaxJobs
	if !f.Embedded {
		rep.Sidecar, rep.Server = lt.ep.Sidecar, lt.ep.Server
		return rep, lt.run(ctx, rep)
	}
	s, seeds, stop, err := startEmbedded(ctx, f)
	if err != nil {
		return nil, err
	}
	lt.seeds = seeds
	lt.ep.Server, lt.ep.NKey, lt.ep.Sidecar = s.ClientURL(), s.LauncherNKeyFile(), s.ID()
	lt.ep.Creds, lt.ep.TLSCA, lt.ep.TLSCert, lt.ep.TLSKey = "", "", "", ""
	rep.Target, rep.Sidecar, rep.Server = "embedded", s.ID(), s.ClientURL()
	if rep.Leases.MaxJobs == 0 {
		rep.Leases.MaxJobs = configs.Default().Admission.MaxJobs
	}
	rep.Process = &ProcessStats{}
	before := readProcess()
	rep.Process.GoroutinesBefore, rep.Process.HeapBeforeMiB = before.goroutines, before.heapMiB
	rep.Process.RSSBeforeMiB, rep.Process.RSSNote = before.rssMiB, before.rssNote
	runErr := lt.run(ctx, rep)
	if runErr == nil {
		settleGoroutines(before.goroutines, 5*time.Second)
		after := readProcess()
		rep.Process.GoroutinesAfter, rep.Process.HeapAfterMiB, rep.Process.RSSAfterMiB = after.goroutines, after.heapMiB, after.rssMiB
	}
	if err := stop(); err != nil && runErr == nil {
		runErr = fmt.Errorf("embedded sidecar: %w", err)
	}
	return rep, runErr
}

// startEmbedded starts an in-process sidecar on a simulated H200 with an
// embedded NATS server on a loopback port, and waits until it is ready.
// stop ends it and removes its data directory.
func startEmbedded(ctx context.Context, f *Config) (_ *sidecar.Sidecar, seeds []string, _ func() error, _ error) {
	dir, err := os.MkdirTemp("", "colocd-loadtest-")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("embedded sidecar: %w", err)
	}
	if seeds, err = launcherIdentities(dir, f.Launchers); err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, fmt.Errorf("embedded sidecar: %w", err)
	}
	c := configs.Default()
	c.Sidecar.ID = "loadtest"
	c.Sidecar.DataDir = dir
	c.NATS.Listen = "127.0.0.1:0"
	c.GPU.Backend = configs.BackendSim
	c.MPS.Control = mps.SimControl
	c.MPS.PipeDir, c.MPS.LogDir = filepath.Join(dir, "mps-pipe"), filepath.Join(dir, "mps-log")
	c.Telemetry.HTTP = "127.0.0.1:0"
	c.Services = []configs.Service{{Name: "inference", Profile: f.ServiceProfile, RateRPS: 8, SLO: configs.SLO{P99MS: 10000}}}
	if f.MaxJobs > 0 {
		c.Admission.MaxJobs = f.MaxJobs
	}
	if f.DecisionTimeout > 0 {
		c.Admission.DecisionTimeout = f.DecisionTimeout
	}
	logger := slog.New(slog.NewTextHandler(cmp.Or[io.Writer](f.Log, io.Discard), &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "sidecar")
	s, err := sidecar.New(ctx, &c, sidecar.Options{Logger: logger, Version: f.Version})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, fmt.Errorf("embedded sidecar: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	stop := func() error {
		cancel()
		err := <-done
		return errors.Join(err, os.RemoveAll(dir))
	}
	deadline := time.Now().Add(f.Endpoint.Timeout)
	for s.Ready() != nil {
		if time.Now().After(deadline) || ctx.Err() != nil {
			err := s.Ready()
			return nil, nil, nil, errors.Join(fmt.Errorf("embedded sidecar not ready: %w", err), stop())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s, seeds, stop, nil
}

// launcherIdentities makes n launcher identities in dataDir's launchers
// directory and returns their seed files.
func launcherIdentities(dataDir string, n int) ([]string, error) {
	seeds := make([]string, n)
	for i := range n {
		name := "loadtest-" + strconv.Itoa(i)
		seed, _, err := natsserver.AddLauncher(filepath.Join(dataDir, "launchers"), name)
		if err != nil {
			return nil, err
		}
		seeds[i] = filepath.Join(dataDir, name+".nk")
		if err := os.WriteFile(seeds[i], seed, 0o600); err != nil {
			return nil, err
		}
	}
	return seeds, nil
}

// run connects the launchers and the sampler, runs the load for the
// duration and fills rep.
func (lt *loadtest) run(ctx context.Context, rep *Report) error {
	type conn struct {
		c  *bus.Client
		nc *nats.Conn
	}
	conns := make([]conn, 0, lt.cfg.Launchers+1)
	defer func() {
		for _, c := range conns {
			c.nc.Close()
		}
	}()
	for i := range lt.cfg.Launchers + 1 { // the last is the sampler's
		ep := lt.ep
		if i < len(lt.seeds) {
			ep.NKey = lt.seeds[i]
		}
		c, nc, err := ep.Dial(true)
		if err != nil {
			return err
		}
		conns = append(conns, conn{c, nc})
	}
	sampler := conns[len(conns)-1].c
	// The profile as colocd run sends it: uploaded once when large.
	if err := launch.SendProfile(ctx, sampler, lt.ep.Sidecar, &lt.req, lt.cfg.SendProfile, io.Discard); err != nil {
		return err
	}
	rep.ProfileSent = "inline"
	if lt.req.ProfileRef != "" {
		rep.ProfileSent = "ref"
	}
	total := newTally()
	stopSampling := make(chan struct{})
	sampled := make(chan *tally, 1)
	go func() { sampled <- lt.sample(sampler, stopSampling, &rep.Leases) }()

	start := time.Now()
	end := start.Add(lt.cfg.Duration)
	tallies := make([]*tally, lt.cfg.Launchers)
	var wg sync.WaitGroup
	for i := range lt.cfg.Launchers {
		wg.Go(func() { tallies[i] = lt.launcher(ctx, i, conns[i].c, conns[i].nc, end) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	total.merge(<-sampled)
	for _, t := range tallies {
		total.merge(t)
	}
	lt.leftAfter(sampler, total, &rep.Leases)
	for i := range conns { // the sidecar's "after" figures come without them
		conns[i].nc.Close()
	}
	rep.fill(total, elapsed)
	return ctx.Err()
}

// launcher loops over cycles until end: a ping, then admit, and when
// admitted renew and release. A cycle under way always finishes, so that
// no lease outlives the run.
func (lt *loadtest) launcher(ctx context.Context, i int, c *bus.Client, nc *nats.Conn, end time.Time) *tally {
	t := newTally()
	for n := 0; time.Now().Before(end) && ctx.Err() == nil; n++ {
		ok := lt.call(t, opPing, func(ctx context.Context) error {
			_, err := nc.RequestWithContext(ctx, pingSubject, nil)
			return err
		})
		if ok {
			ok = lt.cycle(t, c, fmt.Sprintf("%s-%d-%d", lt.jobPrefix, i, n))
		}
		t.cycles++
		if !ok { // do not spin on a sidecar that fails fast
			time.Sleep(10 * time.Millisecond)
		}
	}
	return t
}

// cycle is one admit and, when admitted, one renew and one release; false
// when a call failed.
func (lt *loadtest) cycle(t *tally, c *bus.Client, jobID string) bool {
	req := lt.req // a fresh request id and token per cycle, drawn by Admit
	req.Job.ID = jobID
	sid := lt.ep.Sidecar
	var d *v1.Decision
	if !lt.call(t, opAdmit, func(ctx context.Context) (err error) {
		d, err = c.Admit(ctx, sid, &req)
		return err
	}) {
		return false
	}
	t.outcomes[d.Decision]++
	if d.Decision == v1.DecisionDeny {
		t.denyCodes[d.Reason.Code]++
		return true
	}
	if d.Lease == nil || d.Lease.Token == "" {
		t.fail(opAdmit, "bad_answer", fmt.Errorf("%w: a %s without a lease", errBadAnswer, d.Decision))
		return false
	}
	ref := &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}
	renewed := lt.call(t, opRenew, func(ctx context.Context) error {
		_, err := c.Renew(ctx, sid, ref)
		return err
	})
	released := lt.call(t, opRelease, func(ctx context.Context) error { return c.Release(ctx, sid, ref) })
	return renewed && released
}

// call times one round trip, bounded by --timeout. It is not cut short by
// the end of the run or an interrupt, so that a granted lease is released.
func (lt *loadtest) call(t *tally, op string, f func(ctx context.Context) error) bool {
	ctx, cancel := context.WithTimeout(context.Background(), lt.ep.Timeout)
	defer cancel()
	t0 := time.Now()
	err := f(ctx)
	t.record(op, time.Since(t0), err)
	return err == nil
}

// sample asks the sidecar's status until stop closes and keeps the most
// live leases it reported.
func (lt *loadtest) sample(c *bus.Client, stop <-chan struct{}, ls *LeaseStats) *tally {
	t := newTally()
	for {
		var st *v1.Status
		if lt.call(t, opStatus, func(ctx context.Context) (err error) {
			st, err = c.Status(ctx, lt.ep.Sidecar)
			return err
		}) {
			ls.Samples++
			shared := 0 // max_jobs bounds the co-located leases; a lent MIG instance is not one
			for _, l := range st.Leases {
				if l.Instance == nil {
					shared++
				}
			}
			ls.MaxLive = max(ls.MaxLive, shared)
		}
		select {
		case <-stop:
			return t
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// leftAfter counts the run's leases the sidecar still holds.
func (lt *loadtest) leftAfter(c *bus.Client, t *tally, ls *LeaseStats) {
	var st *v1.Status
	if !lt.call(t, opStatus, func(ctx context.Context) (err error) {
		st, err = c.Status(ctx, lt.ep.Sidecar)
		return err
	}) {
		return
	}
	for _, l := range st.Leases {
		if strings.HasPrefix(l.JobID, lt.jobPrefix+"-") {
			ls.LeftAfter++
		}
	}
}

// fill computes the figures and the failures from the merged tally.
func (rep *Report) fill(t *tally, elapsed time.Duration) {
	rep.DurationS = elapsed.Seconds()
	rep.Cycles = t.cycles
	rep.Outcomes, rep.DenyCodes, rep.ErrorsByCode = t.outcomes, t.denyCodes, t.errs
	for k, e := range t.firstErr {
		rep.FirstErrors = append(rep.FirstErrors, k+": "+e)
	}
	slices.Sort(rep.FirstErrors)
	for _, n := range t.errs {
		rep.Errors += n
	}
	for _, n := range t.outcomes {
		rep.Admits += n
	}
	rep.AdmitsPerS = float64(rep.Admits) / elapsed.Seconds()
	rep.CyclesPerS = float64(rep.Cycles) / elapsed.Seconds()
	for _, op := range loadOps {
		rep.Ops = append(rep.Ops, summarize(op, t.lat[op]))
	}
	if ping := rep.Ops[0]; ping.P50MS > 0 {
		for i := range rep.Ops {
			rep.Ops[i].P50OverPing = rep.Ops[i].P50MS / ping.P50MS
		}
	}
	if rep.Errors > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d calls failed", rep.Errors))
	}
	if rep.Leases.MaxJobs > 0 && rep.Leases.MaxLive > rep.Leases.MaxJobs {
		rep.Failures = append(rep.Failures, fmt.Sprintf("the sidecar held %d leases, more than max_jobs %d", rep.Leases.MaxLive, rep.Leases.MaxJobs))
	}
	if rep.Leases.LeftAfter > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d leases of the run still live after it", rep.Leases.LeftAfter))
	}
	if rep.Admits == 0 {
		rep.Failures = append(rep.Failures, "no admit was answered")
	}
}

// summarize returns the count, mean and percentiles (nearest rank) of ds.
func summarize(op string, ds []time.Duration) OpStats {
	s := OpStats{Op: op, Count: len(ds)}
	if len(ds) == 0 {
		return s
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rank := func(p float64) time.Duration { return ds[max(int(math.Ceil(p*float64(len(ds))))-1, 0)] }
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	s.MeanMS = ms(sum / time.Duration(len(ds)))
	s.P50MS, s.P99MS, s.MaxMS = ms(rank(0.50)), ms(rank(0.99)), ms(ds[len(ds)-1])
	return s
}

// WriteText writes the report for a person: the figures, a table of the
// round trips, the process's size and why it failed.
func (rep *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "colocd loadtest: %d launchers for %.1f s against sidecar %s (%s, %s)\n", rep.Launchers, rep.DurationS, termtext.Line(rep.Sidecar), rep.Target, termtext.Line(rep.Server))
	fmt.Fprintf(w, "admits: %d (%.1f/s), cycles %d (%.1f/s); profile %d bytes, sent %s\n", rep.Admits, rep.AdmitsPerS, rep.Cycles, rep.CyclesPerS, rep.ProfileSize, rep.ProfileSent)
	fmt.Fprintf(w, "outcomes: %s; deny reasons: %s\n", countList(rep.Outcomes), countList(rep.DenyCodes))
	fmt.Fprintf(w, "errors: %d%s\n", rep.Errors, parenList(rep.ErrorsByCode))
	for _, e := range rep.FirstErrors {
		fmt.Fprintf(w, "  %s\n", termtext.Line(e))
	}
	maxJobs := "not checked"
	if rep.Leases.MaxJobs > 0 {
		maxJobs = strconv.Itoa(rep.Leases.MaxJobs)
	}
	fmt.Fprintf(w, "leases: at most %d live in %d status samples (max_jobs %s); %d of the run live after it\n\n",
		rep.Leases.MaxLive, rep.Leases.Samples, maxJobs, rep.Leases.LeftAfter)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tcount\tmean ms\tp50 ms\tp99 ms\tmax ms\tp50/ping\t")
	for _, o := range rep.Ops {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.1f\t\n", o.Op, o.Count, o.MeanMS, o.P50MS, o.P99MS, o.MaxMS, o.P50OverPing)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "ping: %s\n", rep.Baseline)
	if p := rep.Process; p != nil {
		fmt.Fprintf(w, "\nprocess (sidecar and launchers; before they connect, after they disconnect; after GC):\n")
		fmt.Fprintf(w, "  RSS MiB     %s → %s (%s)\n", optMiB(p.RSSBeforeMiB), optMiB(p.RSSAfterMiB), p.RSSNote)
		fmt.Fprintf(w, "  heap MiB    %.1f → %.1f\n", p.HeapBeforeMiB, p.HeapAfterMiB)
		fmt.Fprintf(w, "  goroutines  %d → %d\n", p.GoroutinesBefore, p.GoroutinesAfter)
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(w, "\nFAILED: %s\n", strings.Join(rep.Failures, "; "))
	}
	return nil
}

// countList prints "a 3, b 1" in key order, or "none".
func countList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", termtext.Line(k), m[k])
	}
	return strings.Join(parts, ", ")
}

func parenList(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	return " (" + countList(m) + ")"
}

func optMiB(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

// processFigures are one reading of this process's size.
type processFigures struct {
	goroutines int
	heapMiB    float64
	rssMiB     *float64
	rssNote    string
}

const mib = 1 << 20

// readProcess collects garbage, returns freed memory to the OS, and reads
// the goroutines, the live heap and the resident set size.
func readProcess() processFigures {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := processFigures{goroutines: runtime.NumGoroutine(), heapMiB: float64(ms.HeapAlloc) / mib, rssNote: "VmRSS of /proc/self/status"}
	kib, err := vmRSSKiB("/proc/self/status")
	if err != nil {
		p.rssNote = "unavailable: " + err.Error()
		return p
	}
	v := float64(kib) / 1024
	p.rssMiB = &v
	return p
}

// vmRSSKiB reads the VmRSS line of a Linux /proc/<pid>/status file.
func vmRSSKiB(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read rss: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read rss: VmRSS %q: %w", rest, err)
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read rss: %w", err)
	}
	return 0, fmt.Errorf("read rss: no VmRSS line in %s", path)
}

// settleGoroutines waits up to limit for the connections' goroutines to
// end, until no more run than want.
func settleGoroutines(want int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for runtime.NumGoroutine() > want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}
