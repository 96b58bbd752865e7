package sidecar

import (
	"context"
	"testing"
	"time"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
)

// p99Two is p99At with two trainers at pcts a and b.
func p99Two(t *testing.T, a, b int) float64 {
	t.Helper()
	return p99Of(t, serviceProfile, 8, a, b)
}

// Over NATS: a job that does not fit next to a lease at 100 % is admitted
// by lowering that lease (shared_to_fit), the answer's joint object names
// both jobs with their percentages and speeds, and status shows the live
// lease lowered.
func TestAdmitMakesRoomOverNATS(t *testing.T) {
	t.Parallel()
	alone, both, low := p99At(t, 100), p99Two(t, 100, 10), p99Two(t, 10, 10)
	limit := alone + 0.3*(both-alone)
	if !(low < limit && limit < both) {
		t.Fatalf("no scenario: alone %.2f, with a second at 10 %% %.2f, both at 10 %% %.2f ms", alone, both, low)
	}
	cfg := testConfig(t, "gpu-joint", limit/0.9)
	cfg.Admission.DecisionTimeout = 10 * time.Minute // cold joint predictions under the race detector
	cfg.Admission.Identity.MaxWeight = 3             // the operator lets the launcher claim job-b's weight
	s := start(t, cfg, Options{})
	// The joint decision's deadline is the request's: as long as the
	// decision timeout, so that a loaded machine only makes it slower.
	c := bus.NewClient(launcherConn(t, s), bus.WithTimeout(cfg.Admission.DecisionTimeout))
	ctx := context.Background()
	first := leasedInFull(ctx, t, c, s.ID(), admitReq("job-a", 10, 100))
	req := admitReq("job-b", 10, 100)
	req.Job.Weight = 3
	d, err := c.Admit(ctx, s.ID(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", d.Decision, d.Reason.Message)
	if d.Reason.Code != string(admission.CodeSharedToFit) || d.Lease == nil || d.Joint == nil || len(d.Joint.Jobs) != 2 {
		t.Fatalf("decision %s %s (%s), joint %+v: want shared_to_fit with two jobs", d.Decision, d.Reason.Code, d.Reason.Message, d.Joint)
	}
	a, b := d.Joint.Jobs[0], d.Joint.Jobs[1]
	if a.JobID != "job-a" || a.LeaseID != first.Lease.ID || a.WasPct != 100 || a.Pct >= 100 || !(a.Throughput < a.WasThroughput) {
		t.Errorf("live job %+v: want job-a lowered from 100 %%", a)
	}
	if b.JobID != "job-b" || b.LeaseID != "" || b.Pct != d.Lease.ActiveThreadPct || b.Weight != 3 || !(b.Throughput > 0) || b.Utility != 3*b.Throughput {
		t.Errorf("asking job %+v: want job-b at its granted %d %%, weight 3", b, d.Lease.ActiveThreadPct)
	}
	if !(d.Joint.WeightedThroughput > d.Joint.WeightedThroughputBefore) {
		t.Errorf("weighted throughput %.3f from %.3f: want more", d.Joint.WeightedThroughput, d.Joint.WeightedThroughputBefore)
	}
	st, err := c.Status(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	pcts := map[string]int{}
	for _, l := range st.Leases {
		pcts[l.JobID] = l.ActiveThreadPct
	}
	if pcts["job-a"] != a.Pct || pcts["job-b"] != b.Pct {
		t.Errorf("status leases %v, want job-a %d %% and job-b %d %%", pcts, a.Pct, b.Pct)
	}
	if p99 := p99Two(t, a.Pct, b.Pct); p99 > limit*1.0001 {
		t.Errorf("p99 %.2f ms at %d/%d %%, over the limit %.2f", p99, a.Pct, b.Pct, limit)
	}
}
