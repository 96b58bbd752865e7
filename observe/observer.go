package observe

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"
)

// Source is what an Observer reads: a Scraper, or a test's own readings.
type Source interface {
	Scrape(ctx context.Context) (Reading, error)
}

// Defaults of Config.
const (
	DefaultInterval = 5 * time.Second
	DefaultWindow   = time.Minute
	// DefaultHorizon is how far ahead the rate is forecast: long enough
	// for a throttle to be decided and published before the load arrives.
	DefaultHorizon = 30 * time.Second
)

// Config sets how often an Observer scrapes and how long it trusts what it saw.
type Config struct {
	// Interval between scrapes; each scrape may take at most this long.
	Interval time.Duration
	// Window is the span the rate and percentiles are computed over.
	Window time.Duration
	// MaxAge is how long the last good window is used while scrapes fail;
	// past it the observation is expired and the configured rate applies
	// again (0: three intervals).
	MaxAge time.Duration
	// Forecast sets how the rate is forecast; its Horizon is how far
	// ahead (0: DefaultHorizon).
	Forecast Forecast
	// Logger logs state changes; nil discards.
	Logger *slog.Logger
	// History is how far back ObserveSince reaches (0: MaxWindow, at
	// least Window): a quiet server's p99 needs longer than one window to
	// hold enough requests.
	History time.Duration
	// Clock, when set, is the observer's time (nil: time.Now). A replay
	// sets it to its simulated time and calls ScrapeOnce instead of Run.
	Clock func() time.Time
}

// State says how far an observation can be trusted.
type State string

// The observation states.
const (
	// StateNoData: no two good scrapes yet.
	StateNoData State = "no_data"
	// StateFresh: the last scrape succeeded.
	StateFresh State = "fresh"
	// StateStale: scrapes fail, and the last good window is younger than
	// MaxAge: it is still used.
	StateStale State = "stale"
	// StateExpired: the last good scrape is older than MaxAge; nothing
	// observed may be used.
	StateExpired State = "expired"
)

// Observation is the latest of what the server reported.
type Observation struct {
	State State
	Stats
	// Age is the time since the last good scrape (0 before any).
	Age time.Duration
	// Reason says why the state is what it is, in one sentence.
	Reason string
	// ForecastRPS is the request rate forecast Horizon ahead by Holt's
	// linear trend on each interval's rate, plus Forecast.Burst times the
	// window's rate deviation beyond Poisson arrivals' (NaN before two
	// scrapes).
	ForecastRPS float64
}

// Usable reports whether the figures may be decided on.
func (o Observation) Usable() bool { return o.State == StateFresh || o.State == StateStale }

// Observer scrapes one server on a timer and keeps its window.
type Observer struct {
	src Source
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	win     Window
	hist    Window // the readings of the last History
	holt    Holt
	lastOK  time.Time
	lastErr error
}

// NewObserver returns an Observer of src; call Run to start scraping.
func NewObserver(src Source, cfg Config) *Observer {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 3 * cfg.Interval
	}
	if cfg.Forecast.Horizon <= 0 {
		cfg.Forecast.Horizon = DefaultHorizon
	}
	if cfg.History <= 0 {
		cfg.History = MaxWindow
	}
	cfg.History = max(cfg.History, cfg.Window)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Observer{src: src, cfg: cfg, log: log, win: Window{Span: cfg.Window}, hist: Window{Span: cfg.History},
		holt: Holt{Alpha: cfg.Forecast.Alpha, Beta: cfg.Forecast.Beta, Phi: cfg.Forecast.Phi}}
}

// Run scrapes at once and then every Interval until ctx is done.
func (o *Observer) Run(ctx context.Context) error {
	t := time.NewTicker(o.cfg.Interval)
	defer t.Stop()
	for {
		o.ScrapeOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ScrapeOnce scrapes once, within Interval, and adds what it read to the
// window (Run calls it on a timer).
func (o *Observer) ScrapeOnce(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, o.cfg.Interval)
	r, err := o.src.Scrape(sctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		if o.lastErr == nil {
			o.log.Warn("metrics scrape failed", "err", err)
		}
		o.lastErr = err
		return
	}
	if o.lastErr != nil {
		o.log.Info("metrics scrape works again")
	}
	now := o.cfg.Clock()
	if !o.lastOK.IsZero() && now.Sub(o.lastOK) > o.cfg.MaxAge {
		// After an outage longer than MaxAge, a delta across it would
		// average the gap: start the window over.
		o.win = Window{Span: o.cfg.Window}
		o.hist = Window{Span: o.cfg.History}
		o.holt.Reset()
	}
	if prev, ok := o.win.Last(); ok && r.At.After(prev.At) {
		o.holt.Add(delta(prev.Requests, r.Requests) / r.At.Sub(prev.At).Seconds())
	}
	o.lastErr, o.lastOK = nil, now
	o.win.Add(r)
	o.hist.Add(r)
}

// ObserveSince returns the observation over what the server did from
// since on, as far back as History: the current observation's state, age
// and forecast, with the figures of the readings at or after since; a zero
// since is Observe's window. Measuring a prediction against the server
// asks for the time the jobs beside it last changed: everything since
// then, not one window's worth.
func (o *Observer) ObserveSince(since time.Time) Observation {
	obs := o.Observe()
	if since.IsZero() {
		return obs
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if st, ok := o.hist.StatsSince(since); ok && obs.Usable() {
		obs.Stats = st
	}
	return obs
}

// Observe returns the current observation.
func (o *Observer) Observe() Observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	stats, ok := o.win.Stats()
	forecast := o.holt.Forecast(float64(o.cfg.Forecast.Horizon) / float64(o.cfg.Interval))
	if k := cmp.Or(o.cfg.Forecast.Burst, DefaultBurst); k > 0 && !math.IsNaN(forecast) {
		forecast += k * o.win.ExcessSD()
	}
	obs := Observation{Stats: stats, ForecastRPS: forecast}
	if !o.lastOK.IsZero() {
		obs.Age = o.cfg.Clock().Sub(o.lastOK)
	}
	switch {
	case !ok && o.lastErr != nil:
		obs.State, obs.Reason = StateNoData, fmt.Sprintf("no two good scrapes yet; the last failed: %v", o.lastErr)
	case !ok:
		obs.State, obs.Reason = StateNoData, "no two good scrapes yet"
	case obs.Age > o.cfg.MaxAge:
		obs.State, obs.Reason = StateExpired, fmt.Sprintf("the last good scrape is %s old, more than %s: %v", obs.Age.Round(time.Second), o.cfg.MaxAge, o.lastErr)
	case o.lastErr != nil:
		obs.State, obs.Reason = StateStale, fmt.Sprintf("scrapes fail (%v); using the window of %s ago", o.lastErr, obs.Age.Round(time.Second))
	default:
		obs.State, obs.Reason = StateFresh, fmt.Sprintf("%.0f requests over %s", stats.Requests, stats.Elapsed.Round(time.Second))
	}
	return obs
}
