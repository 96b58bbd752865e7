package observe

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/internal/runtest"
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
		o := runObserver(t, src, Config{Interval: 5 * time.Second, Window: time.Minute, Horizon: 15 * time.Second})
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
