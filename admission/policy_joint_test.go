package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// jointProfiles are trainers with different speed-up curves: one that
// fills the GPU (its speed grows with its percentage), one that fills a
// quarter of the SMs (nothing past 25 %), one idle two thirds of the time.
func jointProfiles() []*predictor.Profile {
	mk := func(name string, dur, gap, sm float64) *predictor.Profile {
		p := trainingProfile(name)
		for i := range p.Ops {
			p.Ops[i].DurUS, p.Ops[i].GapUS, p.Ops[i].SM = dur, gap, sm
		}
		return p
	}
	return []*predictor.Profile{mk("dense", 800, 20, 1), mk("narrow", 800, 20, 0.25), mk("gappy", 300, 700, 1)}
}

// arrivalJobs are the four jobs of the arrival scenarios, in order of
// arrival: a dense trainer of weight 1, a gappy one of 1, a narrow one of
// 3 and a dense one of 4.
func arrivalJobs() (ps []*predictor.Profile, weights []float64) {
	profiles := jointProfiles()
	return []*predictor.Profile{profiles[0], profiles[2], profiles[1], profiles[0]}, []float64{1, 1, 3, 4}
}

// predictBoth is eval's joint prediction of the allocations a and b, which
// a test compares; an error fails t.
func predictBoth(ctx context.Context, t *testing.T, eval jointEval, a, b []int) (jointProbe, jointProbe) {
	t.Helper()
	pa, err := eval(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := eval(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return pa, pb
}

// Nothing fits, not even every job at its lowest percentage: an error, not
// an allocation.
func TestJointAllocationInfeasible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	profiles := jointProfiles()
	h := newHarness(t, predictor.ModeMPS, 0.001, nil) // a limit below the solo p99
	ts := []Trainer{{Profile: profiles[0], Key: profiles[0].Key()}}
	_, err := allocate(ctx, []jointJob{{weight: 1, grid: []int{10, 20}, memoryMiB: 1}}, jointLimits{memoryMiB: 10, slots: 1}, h.pol().jointEvalOf(ts), 1)
	if err != errJointInfeasible {
		t.Errorf("err = %v, want errJointInfeasible", err)
	}
	for _, bad := range []jointJob{{weight: 0, grid: []int{10}}, {weight: 1}} {
		if _, err := allocate(ctx, []jointJob{bad}, jointLimits{}, h.pol().jointEvalOf(ts), 1); err == nil {
			t.Errorf("job %+v: want an error", bad)
		}
	}
}

// synthetic is a joint evaluation on a made-up objective, for the
// allocator's own invariants: each running job has throughput 1 and adds
// add to the score, which starts at solo.
func synthetic(solo, add float64) jointEval {
	return func(_ context.Context, pcts []int) (jointProbe, error) {
		pr := jointProbe{score: solo, soloScore: solo, thr: make([]float64, len(pcts))}
		for j, p := range pcts {
			if p > 0 {
				pr.thr[j] = 1
				pr.score += add
			}
		}
		pr.fits = pr.score <= 1
		return pr, nil
	}
}

// The allocator keeps to the memory and slot limits and uses what room
// they leave, also when each job is a small share of a resource, jobs are
// alike, or the SLO slack is thin; a base over the limits is infeasible.
func TestJointAllocationLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	jobs := func(n, mem int) []jointJob {
		out := make([]jointJob, n)
		for j := range out {
			out[j] = jointJob{weight: 1, grid: []int{0, 50}, memoryMiB: mem}
		}
		return out
	}
	running := func(pcts []int) int {
		n := 0
		for _, p := range pcts {
			if p > 0 {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name string
		jobs []jointJob
		lim  jointLimits
		eval jointEval
		want int // jobs running
	}{
		{"5 jobs, 4 slots", jobs(5, 1), jointLimits{memoryMiB: 100, slots: 4}, synthetic(0.1, 0.01), 4},
		{"10 jobs of 10 MiB, 95 MiB", jobs(10, 10), jointLimits{memoryMiB: 95, slots: 10}, synthetic(0.1, 0.01), 9},
		{"3 alike jobs of 1 MiB, 2 MiB", jobs(3, 1), jointLimits{memoryMiB: 2, slots: 3}, synthetic(0.1, 0.01), 2},
		{"room for one by a thin SLO slack", jobs(2, 1), jointLimits{memoryMiB: 10, slots: 2}, synthetic(0.99, 0.006), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := allocate(ctx, tt.jobs, tt.lim, tt.eval, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !plan.probe.fits || !withinLimits(tt.jobs, tt.lim, plan.pcts) {
				t.Fatalf("allocation %v: fits %v, within the limits %v", plan.pcts, plan.probe.fits, withinLimits(tt.jobs, tt.lim, plan.pcts))
			}
			if got := running(plan.pcts); got != tt.want {
				t.Errorf("allocation %v runs %d jobs, want %d", plan.pcts, got, tt.want)
			}
		})
	}
	// Leases that must run, over the limits: infeasible.
	over := []jointJob{{weight: 1, grid: []int{10, 50}, memoryMiB: 10}, {weight: 1, grid: []int{10, 50}, memoryMiB: 10}}
	if _, err := allocate(ctx, over, jointLimits{memoryMiB: 15, slots: 1}, synthetic(0.1, 0.01), 1); err != errJointInfeasible {
		t.Errorf("err = %v, want errJointInfeasible", err)
	}
}

// denseAndNarrow is a harness with no SLO to speak of and two leases at
// 100 %: the dense trainer (weight 1, older) and the narrow one (weight
// 3). both predicts bert's p99 with them at two percentages.
func denseAndNarrow(t *testing.T) (h *harness, granted []Decision, both func(a, b float64) float64) {
	t.Helper()
	profiles := jointProfiles()
	dense, narrow := profiles[0], profiles[1]
	svc := bert()
	both = func(a, b float64) float64 {
		return p99At(t, predictor.ModeMPS, svc, []*predictor.Profile{dense, narrow}, []float64{a, b})
	}
	h = newHarness(t, predictor.ModeMPS, 1e6, nil)
	for i, w := range []float64{1, 3} {
		req := request(fmt.Sprint("joint-", i))
		req.Profile, req.Weight = []*predictor.Profile{dense, narrow}[i], w
		granted = append(granted, mustDecide(t, h, req, Grant))
		time.Sleep(time.Millisecond) // the first is older
	}
	return h, granted, both
}

// twoLowered is a harness with two lowered leases whose workers restarted
// (they may rise): the dense trainer (weight 1, older) and the narrow one
// (weight 3), lowered by a tight SLO to 20 % and 10 %, then an SLO with
// room again, not for both at 100 %. weights are the leases' in live
// (id) order.
func twoLowered(t *testing.T) (*harness, []jointJob, []Decision) {
	t.Helper()
	ctx := context.Background()
	h, granted, both := denseAndNarrow(t)
	if _, err := h.c.UpdateServices(ctx, withSLO(h, both(20, 10)/0.9*(1+1e-9)), 0.1); err != nil {
		t.Fatal(err)
	}
	for i, d := range granted { // the launchers restart their workers at the new percentages
		if err := h.c.Register(ctx, d.Lease.ID, tokenOf(d), []int{100 + i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.c.UpdateServices(ctx, withSLO(h, both(50, 40)/0.9), 0.1); err != nil { // room again, not for all
		t.Fatal(err)
	}
	var weights []jointJob
	for _, l := range h.c.snapshot().live {
		weights = append(weights, jointJob{weight: l.lease.Weight})
	}
	return h, weights, granted
}

// Room for raises is shared by joint allocation: two lowered leases, the
// dense one (weight 1, older) and the narrow one (weight 3). Raised one at
// a time, the older takes the room first; raised jointly, the room goes
// where it is worth more. Both plans fit; the joint one is worth at least
// as much, by the joint prediction.
func TestRaiseSharesTheRoomJointly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, weights, _ := twoLowered(t)
	s := h.c.snapshot()
	if len(s.live) != 2 {
		t.Fatalf("%d live leases, want 2", len(s.live))
	}
	ts := []Trainer{{Profile: s.live[0].lease.Profile, Key: s.live[0].key}, {Profile: s.live[1].lease.Profile, Key: s.live[1].key}}
	eval := s.pol.jointEvalOf(ts)
	current := currentPcts(s.live)
	greedy, _, err := s.pol.greedyRaise(ctx, s.live)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.pol.raisePlan(ctx, s.live)
	if err != nil {
		t.Fatal(err)
	}
	joint, notes, room := r.pcts, r.notes, r.room
	pg, pj := predictBoth(ctx, t, eval, greedy, joint)
	t.Logf("lowered %v; raised one at a time %v (utility %.3f), jointly %v (utility %.3f)", current, greedy, utility(weights, pg), joint, utility(weights, pj))
	if !room || !pj.fits || !pg.fits {
		t.Fatalf("room %v, joint fits %v, greedy fits %v", room, pj.fits, pg.fits)
	}
	if len(notes) != 2 || !strings.Contains(notes[1], "joint allocation among 2 leases") || !strings.Contains(notes[1], "at weight 3") {
		t.Errorf("notes %q, want each lease's share explained", notes)
	}
	if utility(weights, pj) < utility(weights, pg)-1e-9 {
		t.Errorf("joint utility %.4f below one at a time %.4f", utility(weights, pj), utility(weights, pg))
	}
	for i := range joint {
		if joint[i] < current[i] {
			t.Errorf("lease %d lowered by a raise: %d %% from %d %%", i, joint[i], current[i])
		}
	}
}

// A joint raise that would take more than its budget (here 200 ms a
// prediction) gives way, for this round, to raising one at a time: the
// guard does not wait seconds on it.
func TestRaiseJointBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h, _, _ := twoLowered(t)
		s := h.c.snapshot()
		greedy, _, err := s.pol.greedyRaise(ctx, s.live)
		if err != nil {
			t.Fatal(err)
		}
		s.pol.predictor = sleepyPredictor{Predictor: h.model, d: 200 * time.Millisecond}
		h.model.Purge()
		start := time.Now()
		r, err := s.pol.raisePlan(ctx, s.live)
		if err != nil {
			t.Fatal(err)
		}
		got, notes := r.pcts, r.notes
		if took := time.Since(start); !slices.Equal(got, greedy) || notes != nil || took > jointBudget+10*time.Second {
			t.Errorf("plan %v after %s, want one at a time (%v) soon after the %s budget", got, took, greedy, jointBudget)
		}
	})
}

// When a tighter SLO needs leases of one priority lowered, what is left is
// shared by joint allocation if that is worth more than the rule (newest
// first): here the newer lease is the narrow trainer of weight 3, which
// the rule would lower first. Every lease stays at or above its min_pct,
// only goes down, and the set fits by a fresh predictor.
func TestGuardLowersJointly(t *testing.T) {
	t.Parallel()
	// In a bubble, the joint allocation's time budget (jointBudget) is
	// spent only while it waits, never while it computes: a loaded machine
	// that computes slower does not cut the search short.
	synctest.Test(t, testGuardLowersJointly)
}

func testGuardLowersJointly(t *testing.T) {
	ctx := context.Background()
	h, granted, both := denseAndNarrow(t)
	ids := []string{granted[0].Lease.ID, granted[1].Lease.ID}
	dense, narrow := granted[0].Lease.Profile, granted[1].Lease.Profile
	slo := both(50, 30) / 0.9
	s := h.c.snapshot()
	h.c.cfg.Services = withSLO(h, slo) // the rule's plan, by a policy with the new SLO
	rule, _, err := h.pol().replanBy(ctx, s.live)
	if err != nil {
		t.Fatal(err)
	}
	h.c.cfg.Services = withSLO(h, 1e6)
	evs, err := h.c.UpdateServices(ctx, withSLO(h, slo), 0.1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, l := range h.c.Leases() {
		got[l.ID] = l.Pct
	}
	joint := []int{got[ids[0]], got[ids[1]]}
	ts := []Trainer{{Profile: dense, Key: dense.Key()}, {Profile: narrow, Key: narrow.Key()}}
	eval := h.pol().jointEvalOf(ts)
	pr, pj := predictBoth(ctx, t, eval, rule, joint)
	weights := []jointJob{{weight: 1}, {weight: 3}}
	t.Logf("by the rule %v (weighted throughput %.3f), jointly %v (%.3f), %d events", rule, utility(weights, pr), joint, utility(weights, pj), len(evs))
	if !pj.fits || !(utility(weights, pj) > utility(weights, pr)) {
		t.Fatalf("joint %v: fits %v, utility %.3f against the rule's %.3f", joint, pj.fits, utility(weights, pj), utility(weights, pr))
	}
	if p99 := both(float64(joint[0]), float64(joint[1])); p99 > 0.9*slo*1.0001 {
		t.Errorf("p99 %.2f ms at %v, over the limit %.2f", p99, joint, 0.9*slo)
	}
	for _, ev := range evs {
		if ev.Type != EventThrottle || !strings.Contains(ev.Reason, "shared by joint allocation among 2 leases") {
			t.Errorf("event %s: %s", ev.Type, ev.Reason)
		}
	}
	for i, p := range joint {
		if p > 100 || p < 10 {
			t.Errorf("lease %d at %d %%", i, p)
		}
	}
}
