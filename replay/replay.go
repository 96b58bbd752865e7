package replay

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/internal/simclock"
	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/predictor"
	"github.com/colocd/colocd/simserver"
	"github.com/colocd/colocd/simserver/llm"
)

// Policy is how the guard plans: see the package comment.
type Policy string

// The policies.
const (
	Static Policy = "static"
	// Reactive and Forecast are the guard with
	// admission.guard.learn_response off: it decides on the model's
	// prior with the observed correction, planning on the observed load
	// (Reactive) or on its forecast too (Forecast).
	Reactive Policy = "reactive"
	Forecast Policy = "forecast"
	// Learned is the forecast guard with admission.guard.learn_response
	// on, colocd's default: it decides on the server's response it has
	// measured for the job, raising a step at a time (admission's
	// guard_response.go).
	Learned Policy = "learned"
	// BestStatic is no policy colocd has: the training job at the
	// largest percentage that keeps every judged minute within the SLO,
	// found by replaying each percentage of the grid, top down, knowing
	// the whole trace in advance. What a guard could keep at best without
	// moving the job: the measure of the others' work.
	BestStatic Policy = "best-static"
)

// Policies are the policies in the order they are reported.
var Policies = []Policy{Static, Reactive, Forecast, Learned, BestStatic, Oracle, OracleLimit}

// DefaultPolicies are those a replay reports unless asked for others.
var DefaultPolicies = []Policy{Static, Reactive, Forecast, Learned, Oracle}

// ParsePolicy returns the policy named s.
func ParsePolicy(s string) (Policy, error) {
	if p := Policy(s); slices.Contains(Policies, p) {
		return p, nil
	}
	return "", fmt.Errorf("want one of static, reactive, forecast, learned, best-static, oracle, oracle-limit, got %q", s)
}

// Config is one replay.
type Config struct {
	// Service is the inference service the trace's requests are for: its
	// profile, the rate its SLO is set at (what static admission decides
	// on) and its p99 SLO. An engine (BurstSteps set) is judged by its
	// inter-token latencies, a request service by its requests'.
	Service admission.ServiceSpec
	// Mode, Settings: the sharing mode and the admission settings, as
	// colocd's configuration has them.
	Mode     predictor.Mode
	Settings admission.Settings
	// Calibration, Requests, PredictorSeed, SMs and Confidence are the
	// predictor's, as in colocd's configuration (predictor.*).
	Calibration   *predictor.Calibration
	Requests      int
	PredictorSeed uint64
	SMs           int
	Confidence    float64
	// Preset is the simulated server's metrics format (default vllm).
	Preset string
	// Trace is the requests: arrivals, offsets from the trace's start,
	// with their tokens.
	Trace []llm.Request
	// Engine, when set, is the simulated server: a continuous-batching
	// LLM engine built apart from the predictor (simserver/llm), its
	// Requests the trace's; colocd's prediction can be wrong about it, as
	// about a real server. Without it the server draws each request's
	// latency from colocd's own prediction (simserver), wrong only by
	// ErrorFactor.
	Engine *llm.Config
	// ErrorFactor multiplies every latency the simulated server draws, or
	// every step of the engine: a server that much slower than anything
	// predicted (default 1).
	ErrorFactor float64
	// ServerSeed seeds the simulated server's draws.
	ServerSeed uint64
	// Launcher is the training launcher that asks for a slot.
	Launcher Launcher
	// Observe is the observer's configuration (interval, window, horizon).
	Observe observe.Config
	// MinRequests is the fewest requests that must arrive in a minute for
	// it to be judged against the SLO (default 20): a quieter minute's
	// p99 is its one or two slowest requests.
	MinRequests int
	// Policies to report (default DefaultPolicies). Static and the oracle
	// always run: they are what the others' work is measured against.
	Policies []Policy
}

// Result is what one policy did.
type Result struct {
	Policy Policy `json:"name"`
	// Minutes judged (with at least Config.MinRequests requests), and of
	// those the minutes whose p99 was over the SLO.
	Minutes     int `json:"minutes"`
	MinutesOver int `json:"minutes_over"`
	// MinutesOverAlone is how many of those minutes the server alone,
	// with no training job, was over the SLO too: what no policy helps.
	MinutesOverAlone int `json:"minutes_over_alone"`
	// WorkVsStatic is the training work done (Σ over seconds of the
	// running percentage) over the static policy's.
	WorkVsStatic float64 `json:"work_vs_static"`
	// WorkVsOracle is the training work over the oracle's: how much of
	// what any schedule could have done with the SLO kept (oracle.go).
	WorkVsOracle float64 `json:"work_vs_oracle"`
	// WorkVsOracleLimit is the training work over OracleLimit's, when
	// it was replayed: how much of what the guard's own limit allowed.
	WorkVsOracleLimit float64 `json:"work_vs_oracle_limit,omitempty"`
	// WorkPctSeconds is the training work itself, in percent·seconds.
	WorkPctSeconds float64 `json:"work_pct_seconds"`
	// Changes is how often the percentage the job was to run at changed
	// (a start after a stop, a throttle, a raise, a stop), and
	// ChangesPerHour the same over the replayed hours: each costs the
	// launcher a restart.
	Changes        int     `json:"changes"`
	ChangesPerHour float64 `json:"changes_per_hour"`
	// The controller's actions: throttles, raises and revokes (events),
	// and evictions (leases whose processes were ended for it).
	Throttles int `json:"throttles"`
	Raises    int `json:"raises"`
	Revokes   int `json:"revokes"`
	Evictions int `json:"evictions"`
	// WorstP99MS is the highest p99 of a judged minute.
	WorstP99MS float64 `json:"worst_p99_ms"`
	// Pct is best-static's percentage (0: none keeps the SLO).
	Pct int `json:"pct,omitempty"`
	// Series is what happened, every observer interval, and PerMinute
	// each judged minute; for the picture.
	Series    []Sample     `json:"-"`
	PerMinute []MinuteStat `json:"-"`
	slo       float64
}

// Sample is the replay at one moment.
type Sample struct {
	At time.Duration
	// ArrivalRPS is the arrival rate over the last interval; ObservedRPS
	// and ForecastRPS what the observer says (NaN when it says nothing,
	// and always under static).
	ArrivalRPS, ObservedRPS, ForecastRPS float64
	// Pct is the percentage the training job runs at (0: stopped).
	Pct int
}

// MinuteStat is one judged minute.
type MinuteStat struct {
	Minute   int
	Requests int
	P99MS    float64
}

// Validate checks cfg, naming each bad field.
func (cfg *Config) Validate() error {
	var l field.Checker
	if cfg.Service.Profile == nil {
		l.Add("service.profile", "an inference profile", "none")
	}
	if !(cfg.Service.SLOP99MS > 0) {
		l.Add("service.slo_p99_ms", "an SLO above 0 ms", fmt.Sprint(cfg.Service.SLOP99MS))
	}
	if !(cfg.Service.RateRPS > 0) || math.IsInf(cfg.Service.RateRPS, 0) {
		l.Add("service.rate_rps", "a rate above 0 req/s", fmt.Sprint(cfg.Service.RateRPS))
	}
	if cfg.Service.BurstSteps > 0 && cfg.Engine == nil {
		l.Add("service.engine", "a request service, or an engine server to replay an engine on", "an engine")
	}
	if cfg.Calibration == nil {
		l.Add("calibration", "a calibration", "none")
	}
	if len(cfg.Trace) == 0 {
		l.Add("trace", "at least one request", "none")
	}
	if cfg.ErrorFactor != 0 && !(cfg.ErrorFactor > 0 && cfg.ErrorFactor <= 100) {
		l.Add("error", "a factor in (0, 100]", fmt.Sprint(cfg.ErrorFactor))
	}
	if cfg.Launcher.Profile == nil {
		l.Add("launcher.profile", "a training profile", "none")
	}
	return l.Err("replay")
}

// Run replays cfg's trace under each policy and returns their results in
// the order of Policies (static first).
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	cfg.ErrorFactor = cmp.Or(cfg.ErrorFactor, 1)
	cfg.MinRequests = cmp.Or(cfg.MinRequests, 20)
	cfg.Preset = cmp.Or(cfg.Preset, "vllm")
	cfg.Observe.Interval = cmp.Or(cfg.Observe.Interval, observe.DefaultInterval)
	if cfg.Service.Key == (predictor.ProfileKey{}) {
		cfg.Service.Key = cfg.Service.Profile.Key()
	}
	want := cfg.Policies
	if len(want) == 0 {
		want = DefaultPolicies
	}
	w := &world{cfg: cfg, trKey: cfg.Launcher.Profile.Key(), engineAt: map[int]llm.Trainer{}}
	if cfg.Engine == nil {
		w.latency = &simserver.Model{Inference: cfg.Service.Profile, Calibration: cfg.Calibration, Mode: cfg.Mode,
			Requests: cmp.Or(cfg.Requests, 1000), Seed: cmp.Or(cfg.PredictorSeed, 1), SMs: cfg.SMs}
		for _, r := range cfg.Trace {
			w.arrivals = append(w.arrivals, r.Arrival)
		}
	}
	var all []Result
	var static, oracle, atLimit float64
	hours := cfg.Trace[len(cfg.Trace)-1].Arrival.Hours()
	for _, p := range Policies {
		if p != Static && p != Oracle && !slices.Contains(want, p) {
			continue
		}
		replay := w.replay
		switch p {
		case BestStatic:
			replay = w.best
		case Oracle, OracleLimit:
			replay = w.oracle
		}
		r, err := replay(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", p, err)
		}
		switch p {
		case Static:
			static = r.WorkPctSeconds
		case Oracle:
			oracle = r.WorkPctSeconds
		case OracleLimit:
			atLimit = r.WorkPctSeconds
		}
		if hours > 0 {
			r.ChangesPerHour = float64(r.Changes) / hours
		}
		all = append(all, r)
	}
	alone := map[int]bool{}
	for _, m := range w.constants[0].PerMinute {
		alone[m.Minute] = m.P99MS > cfg.Service.SLOP99MS
	}
	var out []Result
	for _, r := range all {
		for _, m := range r.PerMinute {
			if m.P99MS > cfg.Service.SLOP99MS && alone[m.Minute] {
				r.MinutesOverAlone++
			}
		}
		if static > 0 {
			r.WorkVsStatic = r.WorkPctSeconds / static
		}
		if oracle > 0 {
			r.WorkVsOracle = r.WorkPctSeconds / oracle
		}
		if atLimit > 0 {
			r.WorkVsOracleLimit = r.WorkPctSeconds / atLimit
		}
		if slices.Contains(want, r.Policy) {
			out = append(out, r)
		}
	}
	return out, nil
}

// world is what the policies share: the config, and the simulated
// server's latency model (its cache) or the engine's view of the trainer
// at each percentage.
type world struct {
	cfg      Config
	trKey    predictor.ProfileKey
	latency  *simserver.Model
	arrivals []time.Duration
	engineAt map[int]llm.Trainer
	// constants are the server's runs at one constant percentage, by it.
	constants map[int]Result
}

// server builds the policy's simulated server, recording what the
// minutes are judged by in t, with the trainer's percentage from running.
func (w *world) server(t tally, running func() int) (llm.Pager, error) {
	cfg := &w.cfg
	if cfg.Engine == nil {
		return simserver.New(simserver.Config{Preset: cfg.Preset, ModelName: cfg.Service.Name, Arrivals: w.arrivals, Start: start,
			Latency: w.latency, ErrorFactor: cfg.ErrorFactor, Seed: cfg.ServerSeed,
			Trainers: func() []simserver.Trainer {
				if pct := running(); pct > 0 {
					return []simserver.Trainer{{Profile: cfg.Launcher.Profile, Key: w.trKey, Pct: pct}}
				}
				return nil
			},
			OnRequest: t.latency})
	}
	ec := *cfg.Engine
	ec.Requests, ec.Start, ec.Seed, ec.Slowdown = cfg.Trace, start, cfg.ServerSeed, cfg.ErrorFactor
	ec.ModelName = cfg.Service.Name
	ec.Trainers = func() []llm.Trainer {
		pct := running()
		if pct == 0 {
			return nil
		}
		tr, ok := w.engineAt[pct]
		if !ok {
			tr = llm.TrainerFromProfile(cfg.Launcher.Profile, pct)
			w.engineAt[pct] = tr
		}
		return []llm.Trainer{tr}
	}
	if cfg.Service.BurstSteps > 0 {
		ec.OnToken = func(at time.Time, first bool, d time.Duration) {
			if !first {
				t.token(at, float64(d)/float64(time.Millisecond))
			}
		}
	} else {
		ec.OnFinish = func(f llm.Finished) { t.latency(f.Arrival, float64(f.E2E)/float64(time.Millisecond)) }
	}
	return llm.New(ec)
}

// start is the simulated time a replay begins at: any fixed instant does.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// replay runs one policy over the trace, a simulated second at a time.
func (w *world) replay(ctx context.Context, policy Policy) (Result, error) {
	cfg := &w.cfg
	res := Result{Policy: policy}
	clk := simclock.New(start)
	var l *launcher
	minutes := tally{}
	for _, r := range cfg.Trace {
		minutes.arrive(start.Add(r.Arrival))
	}
	srv, err := w.server(minutes, func() int { return l.running })
	if err != nil {
		return res, err
	}
	model, err := admission.NewModel(cfg.Calibration, cmp.Or(cfg.Requests, 1000), cmp.Or(cfg.PredictorSeed, 1), cfg.SMs, cfg.Confidence)
	if err != nil {
		return res, err
	}
	events := &eventLog{}
	evicted := &evictions{}
	deps := admission.Deps{Device: healthyDevice{}, Daemon: healthyDevice{}, Store: admission.NewMemStore(), Events: events,
		Predictor: model, Evictor: evicted, Clock: clk.Now}
	var obs *observe.Observer
	if policy != Static {
		preset, err := observe.PresetNamed(cfg.Preset)
		if err != nil {
			return res, err
		}
		if cfg.Service.BurstSteps > 0 {
			if preset = preset.Steps; preset == nil {
				return res, fmt.Errorf("preset %s: want one that counts an engine's steps (%v)", cfg.Preset, observe.StepPresets())
			}
		}
		ocfg := cfg.Observe
		ocfg.Clock = clk.Now
		obs = observe.NewObserver(&page{srv: srv, scraper: &observe.Scraper{URL: "replay://" + cfg.Service.Name, Preset: preset}, clock: clk.Now}, ocfg)
		deps.Observer = &observer{obs: obs, forecast: policy == Forecast || policy == Learned, clock: clk.Now}
	}
	svc := cfg.Service
	settings := cfg.Settings
	settings.Guard.LearnResponse = policy == Learned
	c, err := admission.New(admission.Config{Mode: cfg.Mode, PipeDir: "/tmp/nvidia-mps", Settings: settings, Services: []admission.ServiceSpec{svc}}, deps)
	if err != nil {
		return res, err
	}
	l = &launcher{Launcher: cfg.Launcher, c: c}
	evicted.l = l
	interval := cfg.Observe.Interval
	end := start.Add(cfg.Trace[len(cfg.Trace)-1].Arrival)
	next := 0   // the next arrival not yet counted in a sample
	target := 0 // the percentage the job is to run at (0: no lease)
	for now := start; now.Before(end); now = now.Add(time.Second) {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		clk.Set(now)
		if err := srv.Advance(now); err != nil {
			return res, err
		}
		tick := now.Sub(start)%interval == 0
		if obs != nil && tick {
			obs.ScrapeOnce(ctx)
		}
		c.Expire(ctx)
		if _, err := c.Guard(ctx); err != nil {
			return res, err
		}
		if err := l.step(ctx, now, events.take()); err != nil {
			return res, err
		}
		res.WorkPctSeconds += float64(l.running)
		if t := l.target(); t != target {
			if target != 0 || now.After(start) {
				res.Changes++
			}
			target = t
		}
		if tick {
			n := next
			for next < len(cfg.Trace) && cfg.Trace[next].Arrival <= now.Sub(start) {
				next++
			}
			s := Sample{At: now.Sub(start), ArrivalRPS: float64(next-n) / interval.Seconds(), ObservedRPS: math.NaN(), ForecastRPS: math.NaN(), Pct: l.running}
			if obs != nil {
				if o := obs.Observe(); o.Usable() {
					s.ObservedRPS, s.ForecastRPS = o.RateRPS, o.ForecastRPS
				}
			}
			res.Series = append(res.Series, s)
		}
	}
	for _, t := range events.all {
		switch t {
		case admission.EventThrottle:
			res.Throttles++
		case admission.EventRaise:
			res.Raises++
		case admission.EventRevoke:
			res.Revokes++
		}
	}
	res.Evictions = evicted.n
	res.PerMinute = minutes.judge(cfg.MinRequests)
	res.slo = cfg.Service.SLOP99MS
	res.tally()
	return res, nil
}

// tally counts the judged minutes, those over the SLO and the worst.
func (r *Result) tally() {
	r.Minutes, r.MinutesOver, r.WorstP99MS = 0, 0, 0
	for _, m := range r.PerMinute {
		r.Minutes++
		if m.P99MS > r.slo {
			r.MinutesOver++
		}
		r.WorstP99MS = max(r.WorstP99MS, m.P99MS)
	}
}

// best returns the first percentage of the grid, from its largest down,
// whose constant run keeps every judged minute within the SLO
// (BestStatic), or 0 when none does.
func (w *world) best(ctx context.Context, _ Policy) (Result, error) {
	for _, pct := range w.grid() {
		res, _, err := w.constant(ctx, pct)
		if err != nil {
			return Result{}, err
		}
		if res.MinutesOver == 0 || pct == 0 {
			res.Policy, res.Pct = BestStatic, pct
			res.WorkPctSeconds = float64(pct) * w.cfg.Trace[len(w.cfg.Trace)-1].Arrival.Seconds()
			return res, nil
		}
	}
	return Result{}, nil // the grid always ends at 0
}

// observer is admission's view of the simulated server's observer.
type observer struct {
	obs      *observe.Observer
	forecast bool
	clock    func() time.Time
}

func (o *observer) ObservedRate(string) (float64, bool) {
	return o.obs.Observe().PlannedRate(o.forecast)
}

// Watches is admission.LatencyObserver: the replay reads its service's metrics.
func (o *observer) Watches(string) bool { return true }

func (o *observer) ObservedWindow(_ string, since time.Time) (admission.ObservedWindow, bool) {
	ob := o.obs.ObserveSince(since)
	since, end, ok := ob.Span(o.clock())
	if !ok {
		return admission.ObservedWindow{}, false
	}
	return admission.ObservedWindow{Since: since, End: end, Requests: ob.Requests, RateRPS: ob.RateRPS,
		MeanMS: ob.MeanMS, P50MS: ob.P50MS, P90MS: ob.P90MS, P99MS: ob.P99MS, P99SureMS: ob.P99SureMS}, true
}

// page is an observe.Source that reads the simulated server's page in
// process, at simulated time.
type page struct {
	srv     llm.Pager
	scraper *observe.Scraper
	clock   func() time.Time
}

func (p *page) Scrape(context.Context) (observe.Reading, error) {
	return p.scraper.Parse([]byte(p.srv.Page()), p.clock())
}

// healthyDevice is a healthy GPU with room, and a healthy MPS daemon.
type healthyDevice struct{}

func (healthyDevice) FreeMemoryMiB(context.Context) (int, error) { return 100_000, nil }
func (healthyDevice) Healthy() (bool, string)                    { return true, "" }

// eventLog keeps the controller's events: those the launcher has not yet
// read, and every type published.
type eventLog struct {
	mu    sync.Mutex
	queue []admission.Event
	all   []admission.EventType
}

func (e *eventLog) Publish(_ context.Context, ev admission.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queue = append(e.queue, ev)
	e.all = append(e.all, ev.Type)
	return nil
}

func (e *eventLog) take() []admission.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queue
	e.queue = nil
	return q
}

// evictions ends the launcher's workers when the controller evicts them,
// and counts it. Processes a restart already replaced are gone: ending
// them is no eviction.
type evictions struct {
	l *launcher
	n int
}

func (e *evictions) Evict(_ context.Context, procs []admission.Process) error {
	if e.l.running > 0 && slices.ContainsFunc(procs, func(p admission.Process) bool { return p.PID == e.l.pid }) {
		e.l.running = 0
		e.n++
	}
	return nil
}
