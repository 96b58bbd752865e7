package admission

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colocd/colocd/predictor"
)

// tiny is the hoarder's request: 1 MiB at 1 %, from identity tenant.
func tiny(tenant, id string) Request {
	r := request(id)
	r.Tenant, r.MemoryMiB, r.MinPct, r.MaxPct = tenant, 1, 1, 1
	return r
}

// One identity that takes small leases back to back gets half of
// admission.max_jobs while another is registered; the other half is left
// to it, and a request without an identity (the operator's) is held to
// max_jobs alone.
func TestIdentityQuotaLeavesRoomForOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 1e6, func(c *Config) { c.MaxJobs = 4 })
	h.c.SetIdentities([]string{"mallory", "alice"})
	for i := range 2 {
		mustDecide(t, h, tiny("mallory", "m"+string(rune('a'+i))), Grant)
	}
	d := mustDecide(t, h, tiny("mallory", "mc"), Deny)
	if d.Code != CodeIdentityQuota || !strings.Contains(d.Message, "holds 2 of this GPU's 2 leases") || !strings.Contains(d.Message, "quota is 2 leases") {
		t.Errorf("the hoarder's third: %s %q, want identity_quota naming 2 of 2 and the quota", d.Code, d.Message)
	}
	honest := request("h1")
	honest.Tenant = "alice"
	if d := mustDecide(t, h, honest, Grant); d.Lease.Tenant != "alice" {
		t.Errorf("lease tenant %q, want alice", d.Lease.Tenant)
	}
	mustDecide(t, h, request("operator"), Grant) // no identity: max_jobs is its only bound
	if d := mustDecide(t, h, request("operator2"), Deny); d.Code != CodeMaxJobs {
		t.Errorf("a fifth job: %s %q, want max_jobs", d.Code, d.Message)
	}
}

// A lone identity may fill the GPU: the quota binds from the moment
// another identity asks, for admission.lease.max.
func TestLoneIdentityFillsTheGPU(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, predictor.ModeMPS, 1e6, func(c *Config) { c.MaxJobs = 4 })
		h.c.SetIdentities([]string{"ray"})
		for i := range 3 {
			mustDecide(t, h, tiny("ray", "r"+string(rune('a'+i))), Grant)
		}
		// Another identity (one a remote server authenticated) asks and is
		// granted the last slot; from then on ray's quota binds.
		s := mustDecide(t, h, tiny("slurm", "s1"), Grant)
		if err := h.c.Release(context.Background(), s.Lease.ID, tokenOf(s)); err != nil {
			t.Fatal(err)
		}
		if d := mustDecide(t, h, tiny("ray", "rd"), Deny); d.Code != CodeIdentityQuota {
			t.Fatalf("ray's fourth while slurm asked lately: %s %q, want identity_quota", d.Code, d.Message)
		}
		// Past admission.lease.max every lease has ended and slurm is
		// forgotten: ray alone takes three again.
		time.Sleep(h.c.cfg.Lease.Max + time.Minute)
		for i := range 3 {
			mustDecide(t, h, tiny("ray", "n"+string(rune('a'+i))), Grant)
		}
	})
}

// An admission.identities entry overrides admission.identity for that
// identity alone; max_memory_mib bounds what its leases pin.
func TestIdentityOverridesAndMemory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 1e6, func(c *Config) {
		c.MaxJobs = 4
		c.Identities = []NamedIdentity{{Name: "ray", MaxJobs: 4, MaxMemoryMiB: 3}, {Name: "slurm"}}
	})
	for i := range 3 {
		mustDecide(t, h, tiny("ray", "r"+string(rune('a'+i))), Grant)
	}
	d := mustDecide(t, h, tiny("ray", "rd"), Deny)
	if d.Code != CodeIdentityQuota || !strings.Contains(d.Message, "quota of 3 MiB") {
		t.Errorf("ray's fourth: %s %q, want identity_quota for memory", d.Code, d.Message)
	}
}

// max_gpu_pct bounds the sum of an identity's percentages: its first job
// is throttled to it, a job whose min_pct the rest cannot hold is denied,
// and a raise never takes the identity past it.
func TestIdentityGPUShare(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 1e6, func(c *Config) { c.Identity.MaxGPUPct = 50 })
	h.c.SetIdentities([]string{"mallory", "alice"})
	r := request("a")
	r.Tenant = "mallory"
	d := mustDecide(t, h, r, Throttle)
	if d.Code != CodeIdentityQuota || d.Pct != 50 {
		t.Fatalf("first: %s at %d %% (%s), want identity_quota at 50 %%", d.Code, d.Pct, d.Message)
	}
	r = request("b")
	r.Tenant, r.MinPct = "mallory", 10
	if d := mustDecide(t, h, r, Deny); d.Code != CodeIdentityQuota || !strings.Contains(d.Message, "0 % left") {
		t.Errorf("second: %s %q, want identity_quota with 0 %% left", d.Code, d.Message)
	}
	s := h.c.snapshot()
	live := s.live
	pcts := make([]int, len(live))
	for i := range pcts {
		pcts[i] = 100
	}
	if got := s.pol.capRaises(&s.view, pcts); got[0] != 50 {
		t.Errorf("a raise to 100 %% of a lease at 50 %%: capped to %v, want 50", got)
	}
}

// Capped raises: the newest lease's raise goes first, and one cut below
// min_move_pct is none.
func TestCapRaises(t *testing.T) {
	t.Parallel()
	pol := &policy{cfg: Config{Settings: Settings{MaxJobs: 4, Identity: IdentityLimits{MaxGPUPct: 60, MaxWeight: 1}, Guard: GuardSettings{MinMovePct: 10}}}}
	lease := func(tenant string, pct int) liveLease { return liveLease{lease: Lease{Tenant: tenant, Pct: pct}} }
	live := []liveLease{lease("a", 20), lease("a", 20), lease("", 10), lease("b", 30)}
	got := pol.capRaises(&view{live: live}, []int{40, 35, 90, 60})
	// a: 75 planned, 15 over: the newest (20 → 35) loses it, 20 → 20; b: 30 → 60 fits.
	want := []int{40, 20, 90, 60}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("capRaises = %v, want %v", got, want)
		}
	}
}

// What an identity claims is capped by what the operator gave it: weight 1
// and priority 0 by default, an admission.identities entry's otherwise.
func TestIdentityClaimsAreCapped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 1e6, func(c *Config) {
		c.Identities = []NamedIdentity{{Name: "ray", MaxWeight: 4, MaxPriority: 10}}
	})
	for _, tc := range []struct {
		tenant       string
		weight       float64
		priority     int
		wantW        float64
		wantP        int
		wantCapNotes bool
	}{
		{"mallory", 1000, 1_000_000, 1, 0, true},
		{"ray", 10, 5, 4, 5, true},
		{"ray", 2, -3, 2, -3, false},
		{"", 1000, 7, 1000, 7, false}, // the operator's own request
	} {
		r := request(tc.tenant + "x" + strings.Repeat("p", tc.priority%3+1))
		r.Tenant, r.Weight, r.Priority = tc.tenant, tc.weight, tc.priority
		d, err := h.c.Quote(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(d.Message, "the most this launcher identity may claim"); got != tc.wantCapNotes {
			t.Errorf("%s weight %g priority %d: message %q, capped note %v, want %v", tc.tenant, tc.weight, tc.priority, d.Message, got, tc.wantCapNotes)
		}
		r.RequestID += "-admit"
		d = mustDecide(t, h, r, d.Outcome)
		if d.Lease == nil || d.Lease.Weight != tc.wantW || d.Lease.Priority != tc.wantP {
			t.Errorf("%s weight %g priority %d: lease %+v, want weight %g priority %d", tc.tenant, tc.weight, tc.priority, d.Lease, tc.wantW, tc.wantP)
		}
		if err := h.c.Release(context.Background(), d.Lease.ID, tokenOf(d)); err != nil {
			t.Fatal(err)
		}
	}
}

// A request_id is one identity's: another identity's admit with the same
// id is its own request, while the same identity's retry gets its lease
// again and a changed body is a conflict.
func TestRequestIDIsPerIdentity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 1e6, nil)
	a := request("shared")
	a.Tenant = "alice"
	first := mustDecide(t, h, a, Grant)
	again := mustDecide(t, h, a, Grant)
	if again.Lease.ID != first.Lease.ID {
		t.Errorf("alice's retry: lease %s, want %s", again.Lease.ID, first.Lease.ID)
	}
	m := request("shared")
	m.Tenant, m.JobID, m.TokenHash = "mallory", "job-mallory", sha256.Sum256([]byte(testToken("job-mallory")))
	other := mustDecide(t, h, m, Grant)
	if other.Lease.ID == first.Lease.ID {
		t.Errorf("mallory's request with alice's request_id got alice's lease %s", first.Lease.ID)
	}
	changed := a
	changed.MaxPct = 50
	if _, err := h.c.Decide(context.Background(), changed); !errors.Is(err, ErrRequestIDReused) {
		t.Errorf("alice's request_id with another body: %v, want ErrRequestIDReused", err)
	}
}

// The limits' keys are checked by name.
func TestIdentitySettingsValidate(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	s.Identity.MaxWeight = 0
	s.Identities = []NamedIdentity{{Name: "ray", MaxJobs: -1}, {Name: "ray"}, {Name: " "}}
	err := s.Validate()
	for _, key := range []string{"admission.identity.max_weight", "admission.identities[0].max_jobs", "admission.identities[1].name", "admission.identities[2].name"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() = %v: want %s named", err, key)
		}
	}
}

// Removing an identity revokes its leases, with the guard's deadline and
// a revoke event each; another identity's lease is left alone.
func TestRevokeIdentity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRevokeIdentity)
}

func testRevokeIdentity(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 1e6, nil)
	gone, kept := request("gone"), request("kept")
	gone.Tenant, kept.Tenant = "ray", "slurm"
	g := mustDecide(t, h, gone, Grant)
	mustDecide(t, h, kept, Grant)
	evs, err := h.c.RevokeIdentity(ctx, "ray")
	if err != nil || len(evs) != 1 || evs[0].Type != EventRevoke || evs[0].LeaseID != g.Lease.ID || !strings.Contains(evs[0].Reason, "removed launcher identity ray") {
		t.Fatalf("RevokeIdentity: %+v, %v; want one revoke of %s", evs, err, g.Lease.ID)
	}
	if want := h.c.now().Add(h.c.cfg.Guard.Deadline); !evs[0].Deadline.Equal(want) {
		t.Errorf("deadline %s, want %s (admission.guard.deadline)", evs[0].Deadline, want)
	}
	for _, l := range h.c.Leases() {
		if l.Revoked != (l.ID == g.Lease.ID) {
			t.Errorf("lease %s (%s): revoked %v", l.ID, l.Tenant, l.Revoked)
		}
	}
	if evs, err := h.c.RevokeIdentity(ctx, "ray"); err != nil || len(evs) != 0 {
		t.Errorf("again: %+v, %v; want nothing to do", evs, err)
	}
}
