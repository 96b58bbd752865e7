package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
)

// roomSetup is a harness where the dense trainer (weight 1) runs alone at
// 100 %, and the SLO leaves no room beside it for the narrow one even at
// 10 %, but room for both once the dense one is lower. It returns the
// dense lease's decision (its min_pct minPct) and the narrow job's request
// (weight 3).
func roomSetup(t *testing.T, edit func(*Config), minPct int) (*harness, Decision, Request) {
	t.Helper()
	profiles := jointProfiles()
	dense, narrow := profiles[0], profiles[1]
	svc := bert()
	at := func(pcts ...float64) float64 {
		return p99At(t, predictor.ModeMPS, svc, []*predictor.Profile{dense, narrow}[:len(pcts)], pcts)
	}
	alone, both, low := at(100), at(100, 10), at(10, 10)
	limit := alone + 0.3*(both-alone)
	if !(low < limit && alone < limit && limit < both) {
		t.Fatalf("no scenario: dense alone %.2f, with narrow at 10 %% %.2f, both at 10 %% %.2f ms", alone, both, low)
	}
	h := newHarness(t, predictor.ModeMPS, limit/0.9, func(c *Config) {
		c.DecisionTimeout = 10 * time.Minute // cold joint predictions under the race detector
		if edit != nil {
			edit(c)
		}
	})
	first := request("dense")
	first.Profile, first.Weight, first.MinPct = dense, 1, minPct
	d := mustDecide(t, h, first, Grant)
	req := request("narrow")
	req.Profile, req.Weight = narrow, 3
	return h, d, req
}

// An admit that does not fit at its min_pct next to a live lease is given
// room by lowering the lease, when that adds weighted throughput: the
// decision says so (shared_to_fit, the prices, each job's percentage and
// throughput), the lease is throttled with an event and a deadline before
// the new lease exists, and everything fits by the real predictor.
func TestAdmitMakesRoomByLoweringLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, dense, req := roomSetup(t, nil, 10)
	d, err := h.c.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %d %%: %s", d.Outcome, d.Pct, d.Message)
	if d.Outcome == Deny || d.Code != CodeSharedToFit || d.Lease == nil || d.Joint == nil {
		t.Fatalf("decision %s %s (%s), joint %v: want the job admitted by joint allocation", d.Outcome, d.Code, d.Message, d.Joint)
	}
	j := d.Joint
	if len(j.Shares) != 2 || j.Shares[0].LeaseID != dense.Lease.ID || j.Shares[1].LeaseID != "" || j.Shares[1].Pct != d.Pct {
		t.Fatalf("shares %+v: want the live lease, then the job at its granted %d %%", j.Shares, d.Pct)
	}
	if !(j.Utility > j.Before) || j.Prices.SLO < 0 || j.Prices.Memory != 0 || j.Prices.Slots != 0 {
		t.Errorf("utility %.3f from %.3f, prices %+v: want more weighted throughput, only the SLO slack priced", j.Utility, j.Before, j.Prices)
	}
	lowered := j.Shares[0]
	if lowered.WasPct != 100 || lowered.Pct >= 100 || lowered.Pct < dense.Lease.MinPct || !(lowered.Throughput < lowered.WasThroughput) {
		t.Errorf("live lease share %+v: want it lowered from 100 %%, not below its min_pct, slower", lowered)
	}
	for _, want := range []string{"by joint allocation", "job job-dense goes from 100 %", "weighted throughput goes from"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q lacks %q", d.Message, want)
		}
	}
	var throttle *Event
	for _, ev := range h.events.all() {
		if ev.LeaseID == dense.Lease.ID && ev.Type == EventThrottle {
			throttle = &ev
		}
	}
	if throttle == nil || throttle.Pct != lowered.Pct || throttle.Deadline.IsZero() || !strings.Contains(throttle.Reason, "to make room for job job-narrow") {
		t.Fatalf("events %+v: want a throttle of the live lease to %d %% with a deadline and its reason", h.events.all(), lowered.Pct)
	}
	leases := map[string]Lease{}
	for _, l := range h.c.Leases() {
		leases[l.ID] = l
	}
	if got := leases[dense.Lease.ID]; got.Pct != lowered.Pct || got.Deadline.IsZero() {
		t.Errorf("live lease now %d %% (deadline %v), want %d %% with a deadline", got.Pct, got.Deadline, lowered.Pct)
	}
	// The real predictor, fresh: both at their new percentages fit.
	svc := h.c.cfg.Services[0]
	p99 := p99At(t, predictor.ModeMPS, svc, []*predictor.Profile{jointProfiles()[0], jointProfiles()[1]}, []float64{float64(lowered.Pct), float64(d.Pct)})
	if limit := 0.9 * svc.SLOP99MS; p99 > limit*1.0001 {
		t.Errorf("p99 %.2f ms with both at %d/%d %%, limit %.2f", p99, lowered.Pct, d.Pct, limit)
	}
}

// A quote shows what the job would get and what it would cost the live
// leases, and changes nothing.
func TestQuoteShowsTheCostToOthers(t *testing.T) {
	t.Parallel()
	h, dense, req := roomSetup(t, nil, 10)
	q := mustQuote(t, h, req)
	if q.Code != CodeSharedToFit || q.Joint == nil || len(q.Joint.lowers()) != 1 || q.Lease != nil {
		t.Fatalf("quote %s %s (%s): want shared_to_fit with one lease lowered, no lease", q.Outcome, q.Code, q.Message)
	}
	if got := h.c.Leases(); len(got) != 1 || got[0].Pct != 100 || len(h.events.all()) != 0 {
		t.Errorf("after a quote: leases %+v, events %d; want the live lease untouched", got, len(h.events.all()))
	}
	if d := mustDecide(t, h, req, q.Outcome); d.Pct != q.Pct || d.Joint.Shares[0].Pct != q.Joint.Shares[0].Pct {
		t.Errorf("admit %d %% (live lease %d %%), quote said %d %% (%d %%)", d.Pct, d.Joint.Shares[0].Pct, q.Pct, q.Joint.Shares[0].Pct)
	}
	if l := q.Joint.Shares[0]; l.LeaseID != dense.Lease.ID || l.WasPct != 100 {
		t.Errorf("quote's live share %+v, want lease %s from 100 %%", l, dense.Lease.ID)
	}
}

// Room is not made when it costs the live leases more weighted
// throughput than the job adds (a light job next to a heavy one), nor
// when the leases are at their min_pct, nor by moves smaller than
// min_move_pct.
func TestAdmitRoomRefused(t *testing.T) {
	t.Parallel()
	t.Run("not worth it", func(t *testing.T) {
		h, _, req := roomSetup(t, nil, 10)
		req.Weight = 0.01
		d := mustDecide(t, h, req, Deny)
		if d.Code != CodeSLOViolation || d.Joint == nil || !strings.Contains(d.Message, "weighted throughput would fall") {
			t.Errorf("deny %s (%s), joint %v: want the cost to the live lease named", d.Code, d.Message, d.Joint)
		}
		if got := h.c.Leases(); len(got) != 1 || got[0].Pct != 100 || len(h.events.all()) != 0 {
			t.Errorf("leases %+v, %d events: want the live lease untouched", got, len(h.events.all()))
		}
	})
	for _, tt := range []struct {
		name   string
		edit   func(*Config)
		minPct int
	}{
		{"lease at its min_pct", nil, 100},
		{"moves below min_move_pct", func(c *Config) { c.Guard.MinMovePct = 95 }, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, _, req := roomSetup(t, tt.edit, tt.minPct)
			d := mustDecide(t, h, req, Deny)
			if d.Code != CodeSLOViolation || d.Joint != nil || strings.Contains(d.Message, "joint") || len(h.events.all()) != 0 {
				t.Errorf("deny %s (%s), joint %v, %d events: want the plain SLO deny, nothing moved", d.Code, d.Message, d.Joint, len(h.events.all()))
			}
		})
	}
}

// A store that refuses the throttle of the live lease admits nothing: the
// live lease keeps its percentage and no event is published; once the
// store is back, the same admit makes room.
func TestAdmitRoomStoreRefusesTheThrottle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, dense, req := roomSetup(t, nil, 10)
	fs := &flakyStore{MemStore: h.store}
	h.c.deps.Store = fs
	fs.fail.Store(true)
	d, err := h.c.Decide(ctx, req)
	if !errors.Is(err, ErrUnavailable) || d.Code != CodeStoreUnavailable || d.Lease != nil {
		t.Fatalf("decision %s %s (%s), err %v: want store_unavailable, nothing granted", d.Outcome, d.Code, d.Message, err)
	}
	if got := h.c.Leases(); len(got) != 1 || got[0].ID != dense.Lease.ID || got[0].Pct != 100 || len(h.events.all()) != 0 {
		t.Errorf("leases %+v, %d events: want the live lease at 100 %%, no event", got, len(h.events.all()))
	}
	fs.fail.Store(false)
	if d := mustDecide(t, h, req, Throttle); d.Code != CodeSharedToFit {
		t.Errorf("after the store is back: %s (%s)", d.Code, d.Message)
	}
}

// Concurrent admits that each need room: whatever commits, the leases left
// fit by a fresh predictor, none below its min_pct, and every throttle
// published matches a lease's percentage.
func TestAdmitRoomConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _, req := roomSetup(t, nil, 10)
	var wg sync.WaitGroup
	for i := range 3 {
		r := request(fmt.Sprint("narrow-", i))
		r.Profile, r.Weight = req.Profile, req.Weight
		wg.Go(func() {
			if _, err := h.c.Decide(ctx, r); err != nil && !errors.Is(err, ErrUnavailable) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	live := h.c.Leases()
	for _, l := range live {
		if l.Pct < l.MinPct {
			t.Errorf("lease %s at %d %%, below its min_pct %d", l.JobID, l.Pct, l.MinPct)
		}
	}
	pcts := leasesFit(t, h)
	t.Logf("%d leases at %v %%, %d events", len(live), pcts, len(h.events.all()))
	if len(live) < 2 {
		t.Errorf("%d leases: want room made for at least one", len(live))
	}
}

// leasesFit fails the test unless the live leases fit by a fresh
// predictor, and returns their percentages.
func leasesFit(t *testing.T, h *harness) []int {
	t.Helper()
	var profiles []*predictor.Profile
	var pcts []float64
	var out []int
	for _, l := range h.c.Leases() {
		profiles, pcts, out = append(profiles, l.Profile), append(pcts, float64(l.Pct)), append(out, l.Pct)
	}
	svc := h.c.cfg.Services[0]
	if p99 := p99At(t, predictor.ModeMPS, svc, profiles, pcts); p99 > 0.9*svc.SLOP99MS*1.0001 {
		t.Errorf("leases at %v %%: p99 %.2f ms over the limit %.2f", out, p99, 0.9*svc.SLOP99MS)
	}
	return out
}

// A raise whose record is being written counts at its new percentage: an
// admit decided meanwhile does not take the room the raise took.
func TestRaiseTakesCapacityWhileItIsWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, dense, req := roomSetup(t, func(c *Config) { c.Guard.RaiseAfter = time.Second }, 10)
	id := dense.Lease.ID
	// The dense lease was lowered to 10 % earlier and its workers
	// restarted; alone it has room to rise.
	h.c.mu.Lock()
	h.c.leases[id].lease.Pct, h.c.leases[id].lease.RunningPct = 10, 10
	h.c.g.raiseRoom = map[string]time.Time{id: time.Now().Add(-time.Hour)}
	h.c.g.raiseAt = time.Time{}
	h.c.mu.Unlock()
	st := &stallingStore{MemStore: h.store, lease: id, started: make(chan struct{}), release: make(chan struct{})}
	h.c.deps.Store = st
	raised := done(func() error { _, err := h.c.g.raise(ctx); return err })
	<-st.started // the raise is being written
	// No room to be made from the lease, so the admit's commit does not
	// wait on its write.
	req.Priority = -1
	d, err := h.c.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("admit during the raise's write: %s %d %% (%s)", d.Outcome, d.Pct, d.Code)
	close(st.release)
	finishes(t, "raise", raised)
	leasesFit(t, h)
}

// An admit makes room only by lowering leases of its own priority or
// lower, and counts a declared weight for at most max_weight.
func TestAdmitRoomPrioritiesAndWeights(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("a lease of higher priority keeps its share", func(t *testing.T) {
		h, _, req := roomSetup(t, nil, 10)
		h.c.mu.Lock()
		for _, e := range h.c.leases {
			e.lease.Priority = 100
		}
		h.c.mu.Unlock()
		req.Priority = -100
		d, err := h.c.Decide(ctx, req)
		if err != nil || d.Code != CodeSLOViolation || len(h.events.all()) != 0 {
			t.Errorf("%s (%s), %v, %d events: want the plain deny", d.Code, d.Message, err, len(h.events.all()))
		}
	})
	t.Run("a declared weight counts for at most max_weight", func(t *testing.T) {
		h, _, req := roomSetup(t, func(c *Config) { c.MaxWeight = 1 }, 10)
		q := mustQuote(t, h, req)
		if q.Joint == nil || q.Joint.Shares[1].Weight != 1 {
			t.Errorf("%s (%s), joint %+v: want the weight 3 counted as 1", q.Code, q.Message, q.Joint)
		}
	})
}

// The commit of an admit that makes room waits out a write of a lease it
// lowers (a renew moves no capacity); a lease on its way out (expired,
// its processes still being evicted) or still to restart after an earlier
// throttle is left where it is; a deadline that passes while the
// throttles are written is a timeout, as for a grant.
func TestAdmitRoomCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("behind a renew in flight", func(t *testing.T) {
		h, dense, req := roomSetup(t, nil, 10)
		if _, err := h.c.Quote(ctx, req); err != nil { // warm
			t.Fatal(err)
		}
		st := &stallingStore{MemStore: h.store, lease: dense.Lease.ID, started: make(chan struct{}), release: make(chan struct{})}
		h.c.deps.Store = st
		renewed := done(func() error { _, err := h.c.Renew(ctx, dense.Lease.ID, tokenOf(dense)); return err })
		<-st.started
		decided := done(func() error {
			d, err := h.c.Decide(ctx, req)
			if err == nil && d.Code != CodeSharedToFit {
				t.Errorf("%s (%s): want shared_to_fit", d.Code, d.Message)
			}
			return err
		})
		close(st.release)
		finishes(t, "renew", renewed)
		finishes(t, "admit", decided)
	})
	t.Run("an expired lease being evicted", func(t *testing.T) {
		h, dense, req := roomSetup(t, nil, 10)
		h.c.deps.Evictor = &fakeEvictor{fail: 1 << 30} // the lease keeps counting
		h.c.mu.Lock()
		e := h.c.leases[dense.Lease.ID]
		e.lease.PIDs = []int{4242}
		e.lease.ExpiresAt = time.Now().Add(-time.Second)
		h.c.mu.Unlock()
		d, err := h.c.Decide(ctx, req)
		if err != nil || d.Code != CodeSLOViolation {
			t.Errorf("%s (%s), %v: want the plain deny, the expired lease left as it is", d.Code, d.Message, err)
		}
	})
	t.Run("a lease still to restart", func(t *testing.T) {
		h, dense, req := roomSetup(t, nil, 10)
		h.c.mu.Lock()
		h.c.leases[dense.Lease.ID].lease.ThrottledAt = time.Now()
		h.c.mu.Unlock()
		if d, err := h.c.Decide(ctx, req); err != nil || d.Code != CodeSLOViolation {
			t.Errorf("%s (%s), %v: want the plain deny, the throttled lease left to restart", d.Code, d.Message, err)
		}
	})
	t.Run("the deadline passes while the throttle is written", func(t *testing.T) {
		h, dense, req := roomSetup(t, nil, 10)
		if _, err := h.c.Quote(ctx, req); err != nil { // warm
			t.Fatal(err)
		}
		h.c.deps.Store = &ctxStore{MemStore: h.store, lease: dense.Lease.ID}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		d, err := h.c.Decide(dctx, req)
		if !errors.Is(err, ErrTimeout) || d.Lease != nil {
			t.Errorf("%s %s, %v: want ErrTimeout, nothing granted", d.Outcome, d.Code, err)
		}
		if got := h.c.Leases(); len(got) != 1 || got[0].Pct != 100 {
			t.Errorf("leases %+v: want the live lease at 100 %%", got)
		}
	})
}

// ctxStore holds writes of one lease until the caller's context is done.
type ctxStore struct {
	*MemStore
	lease string
}

func (s *ctxStore) Save(ctx context.Context, l *Lease) error {
	if l.ID == s.lease {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.MemStore.Save(ctx, l)
}

// Four jobs arrive one after another through Decide, each asking 10–100 %
// (weights 1, 1, 3, 4; a dense, a gappy, a narrow and a dense trainer),
// under an SLO that leaves room beside the first at 100 % for little.
// First come, first served (min_move_pct 100: no live lease can move)
// denies what does not fit beside the earlier jobs; admission as it is
// lowers them when that is worth more. Reported: each job's percentage
// (0: denied) and the weighted throughput of what runs, by the joint
// prediction. Admission never does worse, and what runs fits.
func TestAdmissionArrivalsVersusFirstComeFirstServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ps, weights := arrivalJobs()
	lows := make([]float64, len(ps))
	for i := range lows {
		lows[i] = 10
	}
	alone := p99At(t, predictor.ModeMPS, bert(), ps[:1], []float64{100})
	low := p99At(t, predictor.ModeMPS, bert(), ps, lows)
	limit := max(alone, low) * 1.05
	run := func(minMove int) ([]int, float64, bool) {
		h := newHarness(t, predictor.ModeMPS, limit/0.9, func(c *Config) {
			c.PctStep, c.Guard.MinMovePct, c.DecisionTimeout = 10, minMove, 10*time.Minute
		})
		var ids []string
		for i, p := range ps {
			req := request(fmt.Sprint("arrival-", i))
			req.Profile, req.Weight = p, weights[i]
			d, err := h.c.Decide(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			id := ""
			if d.Lease != nil {
				id = d.Lease.ID
			}
			ids = append(ids, id)
			time.Sleep(time.Millisecond) // arrival order is lease age
		}
		pcts := make([]int, len(ps))
		for _, l := range h.c.Leases() {
			for i, id := range ids {
				if l.ID == id {
					pcts[i] = l.Pct
				}
			}
		}
		ts := make([]Trainer, len(ps))
		jobs := make([]jointJob, len(ps))
		for i, p := range ps {
			ts[i], jobs[i] = Trainer{Profile: p, Key: p.Key()}, jointJob{weight: weights[i]}
		}
		pr, err := h.pol().jointEvalOf(ts)(ctx, pcts)
		if err != nil {
			t.Fatal(err)
		}
		return pcts, utility(jobs, pr), pr.fits
	}
	fcfs, uF, fitsF := run(100)
	joint, uJ, fitsJ := run(0)
	t.Logf("first come, first served: %v %% (0: denied), weighted throughput %.3f", fcfs, uF)
	t.Logf("admission:                %v %%, weighted throughput %.3f", joint, uJ)
	if !fitsF || !fitsJ {
		t.Fatalf("what runs does not fit: first come %v, admission %v", fitsF, fitsJ)
	}
	if !slices.Contains(fcfs, 0) {
		t.Fatalf("first come, first served denied nobody (%v): no scenario", fcfs)
	}
	if !(uJ > uF) {
		t.Errorf("admission's weighted throughput %.3f, first come, first served %.3f: want more", uJ, uF)
	}
}
