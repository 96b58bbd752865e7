package admission

import (
	"context"
	"errors"
	"fmt"
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
	svc := ServiceSpec{Name: "bert", Profile: inferenceProfile("bert"), RateRPS: 100}
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
	ctx := context.Background()
	h, dense, req := roomSetup(t, nil, 10)
	q, err := h.c.Quote(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
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
		{"moves below min_move_pct", func(c *Config) { c.MinMovePct = 95 }, 10},
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
	var profiles []*predictor.Profile
	var pcts []float64
	for _, l := range live {
		if l.Pct < l.MinPct {
			t.Errorf("lease %s at %d %%, below its min_pct %d", l.JobID, l.Pct, l.MinPct)
		}
		profiles, pcts = append(profiles, l.Profile), append(pcts, float64(l.Pct))
	}
	svc := h.c.cfg.Services[0]
	if p99 := p99At(t, predictor.ModeMPS, svc, profiles, pcts); p99 > 0.9*svc.SLOP99MS*1.0001 {
		t.Errorf("%d leases at %v %%: p99 %.2f ms over the limit %.2f", len(live), pcts, p99, 0.9*svc.SLOP99MS)
	}
	t.Logf("%d leases at %v %%, %d events", len(live), pcts, len(h.events.all()))
	if len(live) < 2 {
		t.Errorf("%d leases: want room made for at least one", len(live))
	}
}
