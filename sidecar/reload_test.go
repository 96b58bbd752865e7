package sidecar

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/simconfig"
)

// An inference team tightens its SLO in the file: the sidecar reloads it,
// keeps running, and throttles the live lease that no longer fits, with an
// event on the stream the launcher reads. An invalid edit changes nothing.
func TestSLOHotReloadThrottlesLease(t *testing.T) {
	t.Parallel()
	p10, p100 := p99At(t, 10), p99At(t, 100)
	r := newReloading(t, p100/0.9*1.05, "") // room for a job at 100 %
	s, c, path := r.s, r.c, r.path
	ctx := context.Background()
	d := leasedInFull(ctx, t, c, s.ID(), admitReq("job-r", 10, 100))
	sub, err := c.Events(ctx, s.ID(), "job-r", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()

	os.WriteFile(path, []byte("services: [{name: broken"), 0o644) // invalid: ignored, logged
	r.sloMS = (p10 + p100) / 2 / 0.9                              // now only a lower percentage fits
	r.write("")
	select {
	case rec := <-sub.C():
		ev := rec.Event
		if ev.Type != v1.EventThrottle || ev.LeaseID != d.Lease.ID || !(ev.ActiveThreadPct >= 10 && ev.ActiveThreadPct < 100) || ev.Deadline == nil {
			t.Errorf("event %+v, want a throttle of the lease below 100 %% with a deadline", ev)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no throttle event 60 s after the SLO was tightened")
	}
	st, err := c.Status(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Services[0].SLOP99MS; got != (p10+p100)/2/0.9 {
		t.Errorf("status SLO %v, want the new one", got)
	}
	if l := st.Leases; len(l) != 1 || l[0].State != "throttling" || l[0].Deadline == nil || l[0].ActiveThreadPct >= 100 {
		t.Errorf("status leases %+v: want the lease throttling below 100 %% until a deadline", l)
	}
	// Registered again (restarted at the new percentage), it is active.
	if err := register(ctx, c, s.ID(), d.Lease, 4242); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Renew(ctx, s.ID(), &v1.LeaseRef{LeaseID: d.Lease.ID, Token: d.Lease.Token}); err != nil || l.State != "active" || l.Deadline != nil {
		t.Errorf("renew after the restart: %+v, %v; want active, no deadline", l, err)
	}
}

// An edit the sidecar rejects shows in status until an edit is applied.
func TestRejectedReloadShowsInStatus(t *testing.T) {
	t.Parallel()
	r := newReloading(t, 10000, "")
	ctx := context.Background()
	status := func() *v1.Status {
		st, err := r.c.Status(ctx, r.s.ID())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st.ConfigRejected != nil {
		t.Fatalf("rejected %+v before any edit", st.ConfigRejected)
	}
	if err := os.WriteFile(r.path, []byte("services: [{name: broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.eventually("the rejected edit in status", func() bool { return status().ConfigRejected != nil })
	if rj := status().ConfigRejected; rj.Error == "" || rj.At.IsZero() {
		t.Errorf("rejection %+v: want when and why", rj)
	}
	r.sloMS = 9000
	r.write("")
	r.eventually("the rejection cleared by an applied edit", func() bool { return status().ConfigRejected == nil })
}

// reloading is a sidecar run on a config file whose admission section the
// test rewrites.
type reloading struct {
	t         *testing.T
	dir, path string
	sloMS     float64
	s         *running
	c         *bus.Client
}

func newReloading(t *testing.T, sloMS float64, admissionYAML string) *reloading {
	r := &reloading{t: t, dir: t.TempDir(), sloMS: sloMS}
	r.path = filepath.Join(r.dir, "colocd.yaml")
	r.write(admissionYAML)
	cfg, err := configs.Load(r.path)
	if err != nil {
		t.Fatal(err)
	}
	r.s = start(t, cfg, Options{ConfigPath: r.path})
	r.c = client(t, r.s)
	return r
}

// write replaces the file, as editors and ConfigMaps do.
func (r *reloading) write(admissionYAML string) {
	r.t.Helper()
	simconfig.Write(r.t, r.path, simconfig.File{ID: "gpu-reload", DataDir: filepath.Join(r.dir, "data"), Listen: "127.0.0.1:0",
		Requests: testRequests, Profile: serviceProfile, SLOMS: r.sloMS, Admission: admissionYAML})
}

// eventually polls ok until it holds: a reload reaches the sidecar within
// a debounce and a few milliseconds; a minute says it never came.
func (r *reloading) eventually(what string, ok func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("a minute after the edit: %s", what)
		}
	}
}

// decide admits a job and releases what it got: the decision the next
// job would get, without keeping capacity.
func (r *reloading) decide(job string) *v1.Decision {
	r.t.Helper()
	req := admitReq(fmt.Sprintf("%s-%d", job, time.Now().UnixNano()), 10, 100)
	req.RequestID = ""
	d, err := r.c.Admit(context.Background(), r.s.ID(), req)
	if err != nil {
		r.t.Fatalf("admit: %v", err)
	}
	if d.Lease != nil {
		r.release(d.Lease)
	}
	return d
}

// admit takes a lease and returns it.
func (r *reloading) admit(job string, leaseSeconds int) *v1.Lease {
	r.t.Helper()
	ctx := context.Background()
	req := admitReq(job, 10, 100)
	req.LeaseSeconds = leaseSeconds
	d, err := r.c.Admit(ctx, r.s.ID(), req)
	if err != nil || d.Lease == nil {
		r.t.Fatalf("admit %s: %+v, %v", job, d, err)
	}
	return d.Lease
}

func (r *reloading) release(l *v1.Lease) {
	r.t.Helper()
	if err := r.c.Release(context.Background(), r.s.ID(), &v1.LeaseRef{LeaseID: l.ID, Token: l.Token}); err != nil {
		r.t.Fatal(err)
	}
}

// renewedFor renews l and returns how long it now lives.
func (r *reloading) renewedFor(l *v1.Lease) time.Duration {
	r.t.Helper()
	got, err := r.c.Renew(context.Background(), r.s.ID(), &v1.LeaseRef{LeaseID: l.ID, Token: l.Token})
	if err != nil {
		r.t.Fatal(err)
	}
	return time.Until(got.ExpiresAt)
}

// TestEveryHotKeyReloads edits each admission key in the file of a
// running sidecar and sees the next decision (or lease) change.
func TestEveryHotKeyReloads(t *testing.T) {
	t.Parallel()
	near := func(got, want time.Duration) bool { return got > want-30*time.Second && got <= want+time.Second }
	t.Run("max_jobs", func(t *testing.T) {
		r := newReloading(t, 1e6, "max_jobs: 3")
		r.admit("held", 0)
		if d := r.decide("next"); d.Decision != v1.DecisionGrant {
			t.Fatalf("before: %s", d.Decision)
		}
		r.write("max_jobs: 1")
		r.eventually("the next admit is denied for max_jobs", func() bool { return r.decide("next").Reason.Code == "max_jobs" })
	})
	t.Run("memory_reserve_mib", func(t *testing.T) {
		r := newReloading(t, 1e6, "memory_reserve_mib: 2048")
		r.write("memory_reserve_mib: 143000") // of the simulated H200's 143,771 MiB
		r.eventually("the next admit is denied for memory", func() bool { return r.decide("next").Reason.Code == "insufficient_memory" })
	})
	t.Run("headroom", func(t *testing.T) {
		r := newReloading(t, p99At(t, 100)/0.9*1.01, "headroom: 0.1") // room for 100 %
		if d := r.decide("next"); d.Decision != v1.DecisionGrant {
			t.Fatalf("before: %s %s", d.Decision, d.Reason.Message)
		}
		r.write("headroom: 0.5")
		r.eventually("the next admit is no longer a grant at 100 %", func() bool { return r.decide("next").Decision != v1.DecisionGrant })
	})
	t.Run("pct_step", func(t *testing.T) {
		// The SLO leaves room for 35 %, not 40: on a grid of 5 the job
		// gets 35 %; on a grid of 45 (10, 55, 100) it gets 10 %.
		r := newReloading(t, (p99At(t, 35)+p99At(t, 40))/2/0.9, "pct_step: 5")
		l := r.admit("fine", 0)
		r.release(l)
		if l.ActiveThreadPct != 35 {
			t.Fatalf("before: %d %%, want 35", l.ActiveThreadPct)
		}
		r.write("pct_step: 45")
		r.eventually("the next job gets a percentage of the coarser grid", func() bool {
			l := r.admit(fmt.Sprintf("coarse-%d", time.Now().UnixNano()), 0)
			r.release(l)
			return l.ActiveThreadPct == 10
		})
	})
	t.Run("lease", func(t *testing.T) {
		r := newReloading(t, 1e6, "lease: {default: 5m, max: 1h, first_term: 1m}")
		if got := time.Until(r.admit("before", 0).ExpiresAt); !near(got, time.Minute) {
			t.Fatalf("first term before: %v", got)
		}
		r.write("lease: {default: 7m, max: 30m, first_term: 20s}")
		r.eventually("a new lease's first term is 20 s", func() bool {
			l := r.admit(fmt.Sprintf("ft-%d", time.Now().UnixNano()), 0)
			defer r.release(l)
			return near(time.Until(l.ExpiresAt), 20*time.Second)
		})
		if got := r.renewedFor(r.admit("default", 0)); !near(got, 7*time.Minute) {
			t.Errorf("a lease asking for no length renews for %v, want lease.default 7m", got)
		}
		if got := r.renewedFor(r.admit("long", 7200)); !near(got, 30*time.Minute) {
			t.Errorf("a lease asking for 2h renews for %v, want lease.max 30m", got)
		}
	})
	t.Run("decision_timeout", func(t *testing.T) {
		// What the deadline does is admission.TestDeadline's; here, that
		// the running controller has the new value.
		r := newReloading(t, 1e6, "decision_timeout: 5s")
		r.write("decision_timeout: 2s")
		r.eventually("the controller's decision timeout is 2 s", func() bool { return r.s.adm.Config().DecisionTimeout == 2*time.Second })
	})
}
