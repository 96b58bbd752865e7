package observe

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/internal/runtest"
	"github.com/colocd/colocd/internal/simclock"
)

// scripted is a Source whose next answer the test sets: a counter that
// grows by step per scrape, or an error.
type scripted struct {
	mu       sync.Mutex
	requests float64
	step     float64
	err      error
}

func (s *scripted) Scrape(context.Context) (Reading, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return Reading{}, s.err
	}
	s.requests += s.step
	return Reading{At: time.Now(), Requests: s.requests}, nil
}

func (s *scripted) fail(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// TestObserverStates: fresh while scrapes work, stale while they fail for
// less than MaxAge, expired after, and no data again until two scrapes
// after an outage (no delta spans it).
func TestObserverStates(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := &scripted{step: 10}
		o := runObserver(t, src, Config{Interval: 5 * time.Second, Window: time.Minute, MaxAge: 15 * time.Second})
		expect := func(when string, state State, rate float64) {
			t.Helper()
			synctest.Wait()
			obs := o.Observe()
			if obs.State != state || obs.Usable() != (state == StateFresh || state == StateStale) || rate >= 0 && obs.RateRPS != rate {
				t.Errorf("%s: %s (%s), rate %g; want %s, rate %g", when, obs.State, obs.Reason, obs.RateRPS, state, rate)
			}
		}
		expect("after the first scrape", StateNoData, -1)
		time.Sleep(5 * time.Second)
		expect("after two scrapes", StateFresh, 2)
		src.fail(errors.New("connection refused"))
		time.Sleep(10 * time.Second)
		expect("10 s into an outage", StateStale, 2)
		time.Sleep(10 * time.Second)
		expect("20 s into an outage", StateExpired, 2)
		src.fail(nil)
		time.Sleep(5 * time.Second)
		expect("one scrape after the outage", StateNoData, -1)
		time.Sleep(5 * time.Second)
		expect("two scrapes after the outage", StateFresh, 2)
	})
}

// TestObserverForecasts: a load that grows scrape after scrape is forecast
// above its current windowed rate.
func TestObserverForecasts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := &scripted{step: 10}
		o := runObserver(t, src, Config{Interval: 5 * time.Second, Window: time.Minute, Forecast: Forecast{Horizon: 15 * time.Second}})
		// The load steps half-way between scrapes: a step at a scrape's
		// instant would race it (goroutines woken at one instant run in
		// no set order), and the forecast would depend on which ran first.
		time.Sleep(2500 * time.Millisecond)
		for i := range 6 { // 10, 20, ... requests per interval: 2, 4, 6 ... req/s
			src.mu.Lock()
			src.step = 10 * float64(i+1)
			src.mu.Unlock()
			time.Sleep(5 * time.Second)
		}
		synctest.Wait()
		obs := o.Observe()
		if !(obs.ForecastRPS > obs.RateRPS) || !(obs.ForecastRPS > 12) {
			t.Errorf("rising load: forecast %g, windowed rate %g; want the forecast above both it and the last interval's 12", obs.ForecastRPS, obs.RateRPS)
		}
	})
}

// runObserver runs an observer of src until the test ends (its cleanup
// runs inside the test's bubble), and fails the test if Run returned an
// error.
func runObserver(t *testing.T, src Source, cfg Config) *Observer {
	o := NewObserver(src, cfg)
	runtest.UntilCleanup(t, o.Run)
	return o
}

// clocked is a Source on a simulated clock: step more requests per scrape.
type clocked struct {
	clock    *simclock.Clock
	requests float64
	step     float64
}

func (s *clocked) Scrape(context.Context) (Reading, error) {
	s.requests += s.step
	return Reading{At: s.clock.Now(), Requests: s.requests}, nil
}

// ObserveSince reaches back past the window, as far as History, and a
// zero since is the window; on a simulated clock, scraped by ScrapeOnce.
func TestObserveSinceReachesPastTheWindow(t *testing.T) {
	t.Parallel()
	clk := simclock.New(t0)
	src := &clocked{clock: clk, step: 10} // 2 req/s at 5 s scrapes
	o := NewObserver(src, Config{Interval: 5 * time.Second, Window: time.Minute, History: 3 * time.Minute, Clock: clk.Now})
	for range 5 * 12 { // five minutes
		o.ScrapeOnce(context.Background())
		clk.Advance(5 * time.Second)
	}
	clk.Advance(-5 * time.Second) // now is the last scrape
	win := o.Observe()
	if win.Elapsed != time.Minute || !near(win.RateRPS, 2) || win.Age != 0 {
		t.Fatalf("the window: elapsed %s, rate %g, age %s; want 1m, 2, 0", win.Elapsed, win.RateRPS, win.Age)
	}
	if got := o.ObserveSince(time.Time{}); got.Elapsed != win.Elapsed || got.Requests != win.Requests {
		t.Errorf("a zero since: %s and %g requests, want the window's %s and %g", got.Elapsed, got.Requests, win.Elapsed, win.Requests)
	}
	for _, c := range []struct {
		since time.Duration
		want  time.Duration
	}{
		{4 * time.Minute, 55 * time.Second}, // the first reading at or after 4 min
		{2 * time.Minute, 2*time.Minute + 55*time.Second},
		{0, 3 * time.Minute}, // before the history: as far back as it holds
	} {
		got := o.ObserveSince(t0.Add(c.since))
		if got.Elapsed != c.want || !near(got.RateRPS, 2) || got.Requests != 2*c.want.Seconds() || !got.Usable() {
			t.Errorf("since %s: elapsed %s, %g requests at %g req/s; want %s at 2", c.since, got.Elapsed, got.Requests, got.RateRPS, c.want)
		}
	}
}
