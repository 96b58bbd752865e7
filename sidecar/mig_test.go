package sidecar

import (
	"context"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/configs"
)

// migConfig is a sidecar on GPU instance 1 (a 4g.71gb) of a simulated H200
// partitioned as 4g.71gb+3g.71gb, which may lend the 3g.71gb whole.
func migConfig(t *testing.T) *configs.Config {
	t.Helper()
	cfg := testConfig(t, "gpu-mig", 10000)
	cfg.GPU.Device = "0:1:0"
	cfg.GPU.Sim.MIG = []string{"4g.71gb", "3g.71gb"}
	cfg.GPU.GrantInstances = []string{"0:2:0"}
	cfg.MPS.PipeDir = t.TempDir() // each MIG device has its own daemon
	return cfg
}

// On a simulated MIG GPU, over NATS: the free 3g instance is granted whole
// (its UUID as the job's only device, no MPS); with it taken the next job
// co-locates under MPS on the sidecar's own instance; a release frees it;
// a restart keeps the lease on its instance.
func TestMIGFreeInstanceOverNATS(t *testing.T) {
	t.Parallel()
	cfg := migConfig(t)
	s := start(t, cfg, Options{})
	c := client(t, s)
	ctx := context.Background()
	if s.gpuInfo.MIG == nil || s.gpuInfo.MIG.Profile != "4g.71gb" || s.gpuInfo.SMs != 64 {
		t.Fatalf("sidecar guards %+v, want the 4g.71gb", s.gpuInfo)
	}
	lent := leased(ctx, t, c, s.ID(), admitReq("job-lent", 10, 100))
	in := lent.Lease.Instance
	if lent.Decision != v1.DecisionGrant || lent.Reason.Code != string(admission.CodeFreeInstance) || in == nil || in.Profile != "3g.71gb" || in.SMs != 60 || in.MemoryMiB != 71168 {
		t.Fatalf("decision %+v, lease instance %+v: want the 3g.71gb granted whole", lent, in)
	}
	if env := lent.Lease.Env; env["CUDA_VISIBLE_DEVICES"] != in.UUID || env["CUDA_MPS_PIPE_DIRECTORY"] != "" || len(env) != 2 {
		t.Errorf("env %v: want the lease id and CUDA_VISIBLE_DEVICES=%s alone", env, in.UUID)
	}
	shared := leased(ctx, t, c, s.ID(), admitReq("job-shared", 10, 100))
	if shared.Lease.Instance != nil || shared.Reason.Code == string(admission.CodeFreeInstance) ||
		shared.Lease.Env["CUDA_VISIBLE_DEVICES"] != s.gpuInfo.UUID || shared.Lease.Env["CUDA_MPS_PIPE_DIRECTORY"] != cfg.MPS.PipeDir {
		t.Fatalf("second job %+v (env %v): want an MPS grant on the sidecar's own instance %s", shared, shared.Lease.Env, s.gpuInfo.UUID)
	}
	// Registered, the lent job uses its instance's memory, not the
	// inference server's.
	ref := &v1.LeaseRef{LeaseID: lent.Lease.ID, Token: lent.Lease.Token}
	if err := c.Register(ctx, s.ID(), &v1.RegisterRequest{LeaseID: ref.LeaseID, Token: ref.Token, PIDs: []int{4242}}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, s.ID())
	if err != nil || len(st.Leases) != 2 || st.GPU.MemoryTotalMiB != 71168 || st.GPU.MemoryTotalMiB-st.GPU.MemoryFreeMiB != 0 {
		t.Fatalf("status %+v, %v: want two leases and the 4g's memory untouched", st, err)
	}

	// A restart keeps the lease on its instance, and the instance taken.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = start(t, cfg, Options{})
	c = client(t, s)
	var restored *admission.Lease
	for _, l := range s.adm.Leases() {
		if l.ID == ref.LeaseID {
			restored = &l
		}
	}
	if restored == nil || restored.Instance == nil || restored.Instance.UUID != in.UUID {
		t.Fatalf("after a restart: %+v, want the lease on %s", restored, in.UUID)
	}
	third, err := c.Admit(ctx, s.ID(), admitReq("job-third", 10, 100))
	if err != nil || third.Lease == nil || third.Lease.Instance != nil {
		t.Fatalf("with the instance held: %v %+v", err, third)
	}

	// A release frees the instance once its processes are gone.
	if err := c.Release(ctx, s.ID(), ref); err != nil {
		t.Fatal(err)
	}
	// (Until the released lease and its processes are gone, an admit would
	// co-locate the job.) Bounded, so that a view that never catches up
	// fails with the leases instead of hanging the package.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !eventually(wctx, func() bool {
		lend, err := s.sim.gpu.Lendable(ctx)
		return err == nil && len(s.adm.Leases()) == 2 && len(lend[0].Processes) == 0
	}) {
		t.Fatalf("after the release: leases %+v", s.adm.Leases())
	}
	again, err := c.Admit(ctx, s.ID(), admitReq("job-after", 10, 100))
	if err != nil || again.Lease == nil || again.Lease.Instance == nil || again.Lease.Instance.UUID != in.UUID {
		t.Errorf("after the release: %v %+v, want the 3g lent again", err, again)
	}
}
