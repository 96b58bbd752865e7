package admission

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/colocd/colocd/predictor"
)

// fakeInstances are the MIG instances a sidecar may lend, with settable
// processes and memory in use.
type fakeInstances struct {
	mu    sync.Mutex
	insts []Instance
	err   error
	reads int
}

func (f *fakeInstances) Lendable(context.Context) ([]Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	out := make([]Instance, len(f.insts))
	copy(out, f.insts)
	return out, f.err
}

func (f *fakeInstances) set(i int, edit func(*Instance)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	edit(&f.insts[i])
}

const (
	uuid3g = "MIG-11111111-2222-4333-8444-555555555555"
	uuid4g = "MIG-66666666-7777-4888-8999-aaaaaaaaaaaa"
)

func instance3g() Instance {
	return Instance{UUID: uuid3g, Profile: "3g.71gb", SMs: 60, MemoryMiB: 71168, UsedMiB: 0, FreeMiB: 71168}
}

// newLendHarness is a harness whose controller may lend insts.
func newLendHarness(t *testing.T, insts ...Instance) (*harness, *fakeInstances) {
	t.Helper()
	h := newHarness(t, predictor.ModeMPS, 15, nil)
	fi := &fakeInstances{insts: insts}
	c, err := New(h.c.cfg, Deps{Device: h.dev, Daemon: h.daemon, Store: h.store, Events: h.events, Predictor: h.model, Instances: fi})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h, fi
}

// newListingLend is a controller that may lend the 3g, on a GPU that lists
// one compute process (PID 4242, the inference server's).
func newListingLend(t *testing.T) (*Controller, *fakeInstances) {
	t.Helper()
	h, fi := newLendHarness(t, instance3g())
	dev := &listingDevice{fakeDevice: h.dev, pids: []int{4242}}
	c, err := New(h.c.cfg, Deps{Device: dev, Daemon: h.daemon, Store: h.store, Events: h.events, Predictor: h.model, Instances: fi})
	if err != nil {
		t.Fatal(err)
	}
	return c, fi
}

// decideLend decides request id on c and fails t unless it is a grant
// with an instance lent (lent) or one without (!lent).
func decideLend(t *testing.T, c *Controller, id string, lent bool) Decision {
	t.Helper()
	d, err := c.Decide(context.Background(), request(id))
	if err != nil || d.Outcome != Grant || (d.Instance != nil) != lent {
		t.Fatalf("%s: %+v, %v; want a grant with an instance lent: %v", id, d, err, lent)
	}
	return d
}

// A free 3g instance is granted whole: the job's env names the instance and
// nothing of MPS, the services' predictions are those without it, the
// lease holds the instance in the store and in status; the next job, with
// the instance taken, shares the inference server's device under MPS; a
// release frees the instance for the one after.
func TestLendFreeInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := newLendHarness(t, instance3g())
	before, err := h.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.c.Decide(ctx, request("lent"))
	if err != nil {
		t.Fatal(err)
	}
	want := &InstanceGrant{UUID: uuid3g, Profile: "3g.71gb", SMs: 60, MemoryMiB: 71168}
	if d.Outcome != Grant || d.Code != CodeFreeInstance || d.Pct != 100 || !cmp.Equal(d.Instance, want) || d.Lease == nil || !cmp.Equal(d.Lease.Instance, want) {
		t.Fatalf("decision %+v: want a free_instance grant of the 3g", d)
	}
	if !strings.Contains(d.Message, "3g.71gb") || !strings.Contains(d.Message, "whole") {
		t.Errorf("message %q does not say which instance and why", d.Message)
	}
	if wantEnv := map[string]string{EnvLeaseID: d.Lease.ID, EnvVisibleDevices: uuid3g}; !cmp.Equal(d.Env, wantEnv) {
		t.Errorf("env %v, want %v", d.Env, wantEnv)
	}
	if !cmp.Equal(d.Predictions, before.Services) {
		t.Errorf("predictions %+v, want those without the job %+v", d.Predictions, before.Services)
	}
	after, err := h.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(after.Services, before.Services) || len(after.Leases) != 1 || after.Leases[0].Instance == nil {
		t.Errorf("status after the grant: services %+v (before %+v), leases %+v", after.Services, before.Services, after.Leases)
	}
	stored, err := h.store.Load(ctx)
	if err != nil || len(stored) != 1 || !cmp.Equal(stored[0].Instance, want) {
		t.Fatalf("stored %+v, %v: want the lease with its instance", stored, err)
	}

	// The instance is taken: the next job co-locates under MPS.
	d2, err := h.c.Decide(ctx, request("shared"))
	if err != nil {
		t.Fatal(err)
	}
	if d2.Outcome == Deny || d2.Code == CodeFreeInstance || d2.Instance != nil || d2.Env[EnvPipeDirectory] == "" || d2.Env[EnvVisibleDevices] != "" {
		t.Fatalf("second job %+v: want a co-located MPS grant", d2)
	}
	with, _ := h.c.Status(ctx)
	if with.Services[0].PredictedP99MS == before.Services[0].PredictedP99MS {
		t.Errorf("the co-located job left the prediction at %v ms: it is not counted", with.Services[0].PredictedP99MS)
	}

	// A release frees the instance.
	if err := h.c.Release(ctx, d.Lease.ID, tokenOf(d)); err != nil {
		t.Fatal(err)
	}
	d3, err := h.c.Decide(ctx, request("third"))
	if err != nil || d3.Code != CodeFreeInstance || d3.Instance.UUID != uuid3g {
		t.Errorf("after the release: %+v, %v: want the 3g lent again", d3, err)
	}
}

// An instance is free only with no process, nearly no memory in use and
// room for the job; of the free ones, the most SMs go.
func TestLendPicksAFreeInstance(t *testing.T) {
	t.Parallel()
	i4g := Instance{UUID: uuid4g, Profile: "4g.71gb", SMs: 64, MemoryMiB: 71168, FreeMiB: 71168}
	for _, tt := range []struct {
		name string
		edit func(i3, i4 *Instance)
		mem  int
		want string // "" : co-located
	}{
		{"both free: the 4g", func(i3, i4 *Instance) {}, 4096, uuid4g},
		{"4g runs a process", func(i3, i4 *Instance) { i4.PIDs = []int{99} }, 4096, uuid3g},
		{"4g has memory in use", func(i3, i4 *Instance) { i4.UsedMiB, i4.FreeMiB = IdleInstanceMiB+1, 71168-IdleInstanceMiB-1 }, 4096, uuid3g},
		{"idle memory is free", func(i3, i4 *Instance) { i4.UsedMiB, i4.FreeMiB = IdleInstanceMiB, 71168-IdleInstanceMiB }, 4096, uuid4g},
		{"the job fits neither", func(i3, i4 *Instance) {}, 72000, ""},
		{"none free", func(i3, i4 *Instance) { i3.PIDs, i4.PIDs = []int{1}, []int{2} }, 4096, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			i3, i4 := instance3g(), i4g
			tt.edit(&i3, &i4)
			h, _ := newLendHarness(t, i3, i4)
			h.dev.free = 200000
			req := request("pick")
			req.MemoryMiB = tt.mem
			d := mustQuote(t, h, req)
			got := ""
			if d.Instance != nil {
				got = d.Instance.UUID
			}
			if got != tt.want || (tt.want == "") == (d.Code == CodeFreeInstance) {
				t.Errorf("quote %+v: instance %q, want %q", d, got, tt.want)
			}
		})
	}
}

// Instances that cannot be read leave the job to co-location.
func TestLendReadFails(t *testing.T) {
	t.Parallel()
	h, fi := newLendHarness(t, instance3g())
	fi.err = errors.New("nvml: gpu is lost")
	d, err := h.c.Decide(context.Background(), request("unread"))
	if err != nil || d.Outcome == Deny || d.Instance != nil {
		t.Fatalf("%+v, %v: want a co-located grant", d, err)
	}
}

// Jobs that ask at once never share an instance: one gets it, the others
// co-locate.
func TestLendConcurrent(t *testing.T) {
	t.Parallel()
	h, _ := newLendHarness(t, instance3g())
	var wg sync.WaitGroup
	decisions := make([]Decision, 4)
	for i := range decisions {
		wg.Go(func() {
			d, err := h.c.Decide(context.Background(), request(fmt.Sprint("race-", i)))
			if err != nil {
				t.Error(err)
			}
			decisions[i] = d
		})
	}
	wg.Wait()
	lent := 0
	for _, d := range decisions {
		if d.Instance != nil {
			lent++
		}
	}
	held := 0
	for _, l := range h.c.Leases() {
		if l.Instance != nil {
			held++
		}
	}
	if lent != 1 || held != 1 {
		t.Errorf("%d decisions and %d leases hold the instance, want 1 and 1", lent, held)
	}
}

// The guard never lowers a lease that holds an instance: more load throttles
// or revokes the co-located jobs only.
func TestGuardLeavesLentInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := newLendHarness(t, instance3g())
	lent := decideLend(t, h.c, "lent", true)
	decideLend(t, h.c, "shared", false) // the co-located job the load lowers
	svcs := []ServiceSpec{h.c.cfg.Services[0]}
	svcs[0].RateRPS = 1500
	events, err := h.c.UpdateServices(ctx, svcs, h.c.cfg.Headroom)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 {
		t.Fatal("no event: the co-located job was not lowered")
	}
	for _, e := range events {
		if e.LeaseID == lent.Lease.ID {
			t.Errorf("event %+v for the lease that holds an instance", e)
		}
	}
	for _, l := range h.c.Leases() {
		if l.ID == lent.Lease.ID && (l.Revoked || l.Pct != 100 || !l.Deadline.IsZero()) {
			t.Errorf("the lent lease changed: %+v", l)
		}
	}
}

// On a GPU that lists processes, a lease that holds an instance registers
// the processes of its instance, not those of the inference server's.
func TestRegisterOnLentInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, fi := newListingLend(t)
	d := decideLend(t, c, "lent", true)
	fi.set(0, func(i *Instance) { i.PIDs = []int{5151} })
	err := c.Register(ctx, d.Lease.ID, tokenOf(d), []int{4242})
	wantInvalid(t, "register a process of the inference server's device", err, "on the lease's MIG instance "+uuid3g)
	if err := c.Register(ctx, d.Lease.ID, tokenOf(d), []int{5151}); err != nil {
		t.Errorf("register the instance's process: %v", err)
	}
}

// A lease on a lent instance has faults of its own: the sidecar's own
// device or daemon failing leaves it, and its instance faulting revokes it
// (and the instance is lent no more).
func TestLentInstanceFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, fi := newLendHarness(t, instance3g())
	faults := &fakeFaults{}
	h.c.deps.Faults = faults
	lent, shared := decideLend(t, h.c, "lent", true), decideLend(t, h.c, "shared", false)
	faults.set("mps server FAULT")
	evs, err := h.c.Guard(ctx)
	if err != nil || len(evs) != 1 || evs[0].LeaseID != shared.Lease.ID || evs[0].Type != EventRevoke {
		t.Fatalf("a fault of the sidecar's daemon: %+v, %v; want the co-located lease alone revoked", evs, err)
	}
	faults.set("")
	fi.set(0, func(i *Instance) { i.Fault = "XID 79 (GPU has fallen off the bus)" })
	evs, err = h.c.Guard(ctx)
	if err != nil || len(evs) != 1 || evs[0].LeaseID != lent.Lease.ID || evs[0].Type != EventRevoke || !strings.Contains(evs[0].Reason, "XID 79") {
		t.Fatalf("a fault of the lent instance: %+v, %v; want its lease revoked, saying why", evs, err)
	}
	if evs, err := h.c.Guard(ctx); err != nil || len(evs) != 0 {
		t.Errorf("a second round: %+v, %v; want nothing more", evs, err)
	}
	if d, err := h.c.Quote(ctx, request("after")); err != nil || d.Instance != nil {
		t.Errorf("after the fault: %+v, %v; want no instance lent", d, err)
	}
}

// Instances that cannot be read fail the register of a lease that holds
// one, and of no other.
func TestRegisterWhenInstancesUnreadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, fi := newListingLend(t)
	lent, shared := decideLend(t, c, "lent", true), decideLend(t, c, "shared", false)
	fi.mu.Lock()
	fi.err = errors.New("nvml: unknown error")
	fi.mu.Unlock()
	if err := c.Register(ctx, shared.Lease.ID, tokenOf(shared), []int{4242}); err != nil {
		t.Errorf("register a co-located job: %v", err)
	}
	if err := c.Register(ctx, lent.Lease.ID, tokenOf(lent), []int{5151}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("register on the lent instance: %v, want 503", err)
	}
}

// A restart keeps a lease on its instance only when the instance is one
// this sidecar may lend, not its own device, and held by no older lease; it
// takes the instance's figures from the read, not the record.
func TestRestoreLentInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, fi := newLendHarness(t, instance3g())
	h.c.cfg.VisibleDevice = uuid4g
	real := mustDecide(t, h, request("real"), Grant)
	if real.Instance == nil {
		t.Fatalf("%+v", real)
	}
	forge := func(id string, in InstanceGrant, age time.Duration) {
		l := real.Lease.clone()
		l.ID, l.JobID, l.RequestHash, l.Revision = id, "job-"+id, [32]byte{1}, 0
		l.TokenHash = sha256.Sum256([]byte(id))
		l.CreatedAt = l.CreatedAt.Add(age)
		l.Instance = &in
		if err := h.store.Save(ctx, &l); err != nil {
			t.Fatal(err)
		}
	}
	forge("second-holder", *real.Instance, time.Second)                                            // newer, same instance
	forge("own-device", InstanceGrant{UUID: uuid4g, Profile: "4g.71gb", SMs: 64, MemoryMiB: 1}, 0) // the inference server's
	forge("unknown", InstanceGrant{UUID: "MIG-00000000-0000-4000-8000-000000000000", Profile: "1g.18gb", SMs: 16, MemoryMiB: 1}, 0)
	forge("upper-case", InstanceGrant{UUID: "MIG-" + strings.ToUpper(uuid4g[4:]), Profile: "4g.71gb", SMs: 60, MemoryMiB: 1}, 0)
	// The record's figures are not the instance's.
	stored, _ := h.store.Load(ctx)
	for _, l := range stored {
		if l.ID == real.Lease.ID {
			l.Instance = &InstanceGrant{UUID: uuid3g, Profile: "7g.141gb", SMs: 132, MemoryMiB: 143360}
			if err := h.store.Save(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := New(h.c.cfg, Deps{Device: h.dev, Daemon: h.daemon, Store: h.store, Events: h.events, Predictor: h.model, Instances: fi})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	got := c.Leases()
	if len(got) != 1 || got[0].ID != real.Lease.ID || !cmp.Equal(got[0].Instance, &InstanceGrant{UUID: uuid3g, Profile: "3g.71gb", SMs: 60, MemoryMiB: 71168}) {
		t.Errorf("restored %+v: want the real lease alone, with the instance's own figures", got)
	}
}
