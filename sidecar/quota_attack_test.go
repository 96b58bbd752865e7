//go:build attack

package sidecar

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/colocd/colocd/admission"
	v1 "github.com/colocd/colocd/api/v1"
)

// Row "hoarding": a second identity takes 1 MiB, 1 % leases back to back
// and keeps renewing them; the honest identity still gets a lease every
// time it asks, and its renews all succeed.
func TestAttackHoarderLeavesRoomForOthers(t *testing.T) {
	cfg := testConfig(t, "gpu-a", 10000)
	cfg.Admission.MaxJobs = 4
	seed := hostileIdentity(t, cfg.Sidecar.DataDir)
	s := start(t, cfg, Options{})
	hostile, honest := dialAs(t, s, seed), client(t, s)
	ctx := context.Background()

	var held []*v1.LeaseRef
	denied := 0
	for i := range 10 {
		req := admitReq(fmt.Sprintf("hoard-%d", i), 1, 1)
		req.RequestID = fmt.Sprintf("hoarder-request-id-0123456789-%d", i)
		req.MemoryMiB = 1
		d, err := hostile.Admit(ctx, s.ID(), req)
		if err != nil {
			t.Fatalf("hoarder's admit %d: %v", i, err)
		}
		if d.Lease == nil {
			denied++
			if d.Reason.Code != string(admission.CodeIdentityQuota) {
				t.Errorf("hoarder's admit %d: %s %q, want identity_quota", i, d.Reason.Code, d.Reason.Message)
			}
			continue
		}
		held = append(held, &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token})
	}
	if want := (cfg.Admission.MaxJobs + 1) / 2; len(held) != want {
		t.Errorf("the hoarder holds %d leases, want its quota %d", len(held), want)
	}

	const rounds = 10
	var admits, renews []time.Duration
	granted, renewed := 0, 0
	for i := range rounds {
		for _, ref := range held { // the hoarder keeps what it has
			if _, err := hostile.Renew(ctx, s.ID(), ref); err != nil {
				t.Errorf("hoarder's renew: %v", err)
			}
		}
		start := time.Now()
		d, err := honest.Admit(ctx, s.ID(), admitReq(fmt.Sprintf("honest-%d", i), 10, 100))
		admits = append(admits, time.Since(start))
		if err != nil || d.Lease == nil {
			t.Errorf("honest admit %d while hoarded: %v %+v", i, err, d)
			continue
		}
		granted++
		ref := &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}
		start = time.Now()
		if _, err := honest.Renew(ctx, s.ID(), ref); err != nil {
			t.Errorf("honest renew %d: %v", i, err)
		} else {
			renewed++
		}
		renews = append(renews, time.Since(start))
		if err := honest.Release(ctx, s.ID(), ref); err != nil {
			t.Error(err)
		}
	}
	t.Logf("hoarder: %d leases held, %d of 10 denied identity_quota; honest: %d of %d admits granted (p99 %s), %d renewed (p99 %s)",
		len(held), denied, granted, rounds, percentile(admits, 0.99), renewed, percentile(renews, 0.99))
}

// Row "claimed weight": a second identity admits with job.weight 1000
// next to the honest identity's running lease; joint allocation counts it
// as weight 1 and the honest lease keeps its percentage.
func TestAttackClaimedWeightLowersNoOne(t *testing.T) {
	alone, both := p99At(t, 100), p99Two(t, 100, 10)
	limit := alone + 0.3*(both-alone) // a second job fits only if the first goes down
	cfg := testConfig(t, "gpu-joint", limit/0.9)
	cfg.Admission.DecisionTimeout = 10 * time.Minute
	seed := hostileIdentity(t, cfg.Sidecar.DataDir)
	s := start(t, cfg, Options{})
	hostile, honest := dialAs(t, s, seed), client(t, s)
	ctx := context.Background()
	first := leasedInFull(ctx, t, honest, s.ID(), admitReq("job-honest", 10, 100))

	req := admitReq("job-attacker", 10, 100)
	req.Job.Weight = 1000
	d, err := hostile.Admit(ctx, s.ID(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attacker with weight 1000: %s %s (%s)", d.Decision, d.Reason.Code, d.Reason.Message)
	if d.Joint != nil && d.Lease != nil { // a deny's joint is the plan it refused
		for _, j := range d.Joint.Jobs {
			if j.LeaseID == first.Lease.ID && j.Pct < j.WasPct {
				t.Errorf("the honest lease was lowered %d → %d %% for the attacker's claimed weight", j.WasPct, j.Pct)
			}
		}
	}
	l, err := honest.Renew(ctx, s.ID(), &v1.LeaseRef{LeaseID: first.Lease.ID, Token: first.Lease.Token})
	if err != nil {
		t.Fatal(err)
	}
	if l.ActiveThreadPct != 100 || l.State != "active" {
		t.Errorf("the honest lease after the attacker's admit: %d %% %s, want 100 %% active", l.ActiveThreadPct, l.State)
	}
}
