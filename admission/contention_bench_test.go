package admission

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkRenewUnderColdQuotes: renew p99 while 4 clients send cold
// quotes back to back. The scenario is benchHarness's (the V100 profiles,
// 2,000 simulated requests, a throttle that runs the whole search); every
// quote carries a training profile never seen before, so each of its
// predictions is a simulation. Meanwhile one lease is renewed every 2 ms,
// so that the renews sample the quotes at even times, as launchers' renews
// do (back to back, most renews would fall in the moments the quotes leave
// free and hide the ones that wait). Before predictions left the
// controller's lock a renew waited for the quote in progress; now it waits
// only for a CPU.
func BenchmarkRenewUnderColdQuotes(b *testing.B) {
	const quoters = 4
	h, req := benchHarness(b, 1)
	ctx := context.Background()
	d, err := h.c.Decide(ctx, req)
	if err != nil || d.Lease == nil {
		b.Fatalf("the lease to renew: %+v, %v", d, err)
	}
	id, tok := d.Lease.ID, tokenOf(d)

	stop := make(chan struct{})
	qctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	quotes, timeouts := 0, 0
	for q := range quoters {
		wg.Go(func() {
			r := req
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// A profile with one kernel a femtosecond longer: another
				// key, so nothing is cached.
				p := *req.Profile
				p.Ops = slices.Clone(p.Ops)
				p.Ops[0].DurUS *= 1 + float64(q*1_000_000+i+1)*1e-12
				r.Profile, r.ProfileKey = &p, p.Key()
				_, err := h.c.Quote(qctx, r)
				if qctx.Err() != nil {
					return // stopped: the quote in flight is dropped
				}
				if err != nil && !errors.Is(err, ErrTimeout) {
					b.Error(err)
					return
				}
				// A quote past admission.decision_timeout (a slow or
				// busy machine) is the bound doing its work: counted,
				// not a failure of the renews measured here.
				mu.Lock()
				if err != nil {
					timeouts++
				} else {
					quotes++
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // the quoters are simulating

	var durs []time.Duration
	start := time.Now()
	for b.Loop() {
		time.Sleep(2 * time.Millisecond)
		t0 := time.Now()
		if _, err := h.c.Renew(ctx, id, tok); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	elapsed := time.Since(start)
	close(stop)
	cancel()
	wg.Wait()

	slices.Sort(durs)
	q := func(p float64) float64 { return float64(durs[int(p*float64(len(durs)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(q(0.50), "renew-p50-ms")
	b.ReportMetric(q(0.99), "renew-p99-ms")
	b.ReportMetric(q(1), "renew-max-ms")
	mu.Lock()
	b.ReportMetric(float64(quotes)/elapsed.Seconds(), "quotes/s")
	b.ReportMetric(float64(timeouts), "quote-timeouts")
	mu.Unlock()
}
