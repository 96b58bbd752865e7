package sidecar

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/colocd/colocd/admission"
)

// identityUses keeps the identities with the most leases, shows the
// registered ones that hold none at zero, names the sidecars' own account,
// and sums what passes the bound under one series.
func TestIdentityUses(t *testing.T) {
	t.Parallel()
	lease := func(tenant string, pct int) admission.Lease { return admission.Lease{Tenant: tenant, Pct: pct} }
	many := make([]admission.Lease, 0, 70)
	for i := range 70 {
		many = append(many, lease(fmt.Sprintf("user-%02d", i), 1+i%3))
	}
	manyWant := func() []identityUse {
		// 70 identities of one lease each: the 23 at 3 %, then 23 at 2 %,
		// then 18 of the 24 at 1 % (by name); 6 leases at 1 % summed.
		var out []identityUse
		for _, pct := range []int{3, 2, 1} {
			for i := range 70 {
				if 1+i%3 == pct && len(out) < 64 {
					out = append(out, identityUse{identity: fmt.Sprintf("user-%02d", i), leases: 1, pct: int64(pct)})
				}
			}
		}
		return append(out, identityUse{identity: identityOther, leases: 6, pct: 6})
	}()
	tests := []struct {
		name       string
		leases     []admission.Lease
		registered []string
		max        int
		want       []identityUse
	}{
		{name: "nothing", max: 64, want: []identityUse{}},
		{name: "registered and idle", registered: []string{"vision", "default"}, max: 64,
			want: []identityUse{{identity: "default"}, {identity: "vision"}}},
		{name: "summed by identity, most leases first",
			leases:     []admission.Lease{lease("vision", 20), lease("default", 30), lease("vision", 10), lease("", 5)},
			registered: []string{"default", "vision", "speech"}, max: 64,
			want: []identityUse{{"vision", 2, 30}, {"default", 1, 30}, {identityLocal, 1, 5}, {"speech", 0, 0}}},
		{name: "past the bound, summed under _other",
			leases: []admission.Lease{lease("a", 10), lease("b", 20), lease("c", 30), lease("c", 5), lease("d", 1)}, registered: []string{"e"}, max: 2,
			want: []identityUse{{"c", 2, 35}, {"b", 1, 20}, {identityOther, 2, 11}}},
		{name: "a remote server's many users", leases: many, max: maxIdentitySeries, want: manyWant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := identityUses(tt.leases, tt.registered, tt.max)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(identityUse{})); diff != "" {
				t.Errorf("identityUses (-want +got):\n%s", diff)
			}
		})
	}
}

// /metrics shows the GPU's memory (total and free as the device reads them,
// granted the leases' own) and the leases and their percentages by identity, a
// registered identity with none at zero.
func TestGPUAndIdentityMetrics(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "gpu-metrics", 10000)
	seed := identityNamed(t, cfg.Sidecar.DataDir, "vision")
	identityNamed(t, cfg.Sidecar.DataDir, "idle")
	s := start(t, cfg, Options{})
	ctx := context.Background()
	mine, err := client(t, s).Admit(ctx, s.ID(), admitReq("job-default", 10, 40))
	if err != nil || mine.Lease == nil {
		t.Fatalf("default's admit: %v %+v", err, mine)
	}
	req := admitReq("job-vision", 10, 30)
	req.MemoryMiB = 3000
	theirs, err := dialAs(t, s, seed).Admit(ctx, s.ID(), req)
	if err != nil || theirs.Lease == nil {
		t.Fatalf("vision's admit: %v %+v", err, theirs)
	}
	got := gatherGauges(t, s, "colocd_gpu_memory_bytes", "colocd_identity_leases", "colocd_identity_active_thread_pct")
	const mib = 1 << 20
	total := float64(s.gpuInfo.MemoryTotalMiB * mib)
	st, err := s.gpu.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`colocd_gpu_memory_bytes{state="total"}`:                total,
		`colocd_gpu_memory_bytes{state="free"}`:                 float64(st.Memory.FreeMiB * mib),
		`colocd_gpu_memory_bytes{state="granted"}`:              4000 * mib,
		`colocd_identity_leases{identity="default"}`:            1,
		`colocd_identity_leases{identity="vision"}`:             1,
		`colocd_identity_leases{identity="idle"}`:               0,
		`colocd_identity_active_thread_pct{identity="default"}`: float64(mine.Lease.ActiveThreadPct),
		`colocd_identity_active_thread_pct{identity="vision"}`:  float64(theirs.Lease.ActiveThreadPct),
		`colocd_identity_active_thread_pct{identity="idle"}`:    0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/metrics (-want +got):\n%s", diff)
	}
}

// gatherGauges reads the named gauges from the sidecar's registry, as
// name{label="value"} (the one label besides the scope's) → value.
func gatherGauges(t *testing.T, s *running, names ...string) map[string]float64 {
	t.Helper()
	fams, err := s.tel.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !want[f.GetName()] {
			continue
		}
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "otel_scope_name", "otel_scope_version", "otel_scope_schema_url":
				default:
					key += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
				}
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}
