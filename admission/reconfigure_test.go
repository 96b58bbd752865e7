package admission

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/colocd/colocd/predictor"
)

// otherValue is, per Config field (a setting by its path below Config), a
// valid value other than newHarness's. A field missing here fails the
// test: a new field must say whether a reload applies it.
var otherValue = map[string]any{
	"Mode":                      predictor.ModeTimeslice,
	"Services":                  []ServiceSpec{otherService()},
	"Headroom":                  0.2,
	"MaxJobs":                   2,
	"MemoryReserveMiB":          4096,
	"PctStep":                   25,
	"Lease.Default":             7 * time.Minute,
	"Lease.Max":                 2 * time.Hour,
	"Lease.FirstTerm":           30 * time.Second,
	"DecisionTimeout":           9 * time.Second,
	"PipeDir":                   "/run/nvidia-mps",
	"VisibleDevice":             "MIG-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40",
	"VisibilityWindow":          3 * time.Minute,
	"Guard.Deadline":            4 * time.Minute,
	"Guard.RaiseAfter":          7 * time.Minute,
	"Guard.ExploreAfter":        2 * time.Minute,
	"Guard.LearnResponse":       true,
	"Guard.ResponseTTL":         20 * time.Minute,
	"Guard.ResponseQuantile":    0.5,
	"Guard.RaiseStepPct":        5,
	"Guard.RaiseFailLoad":       0.1,
	"Guard.MinMovePct":          20,
	"Guard.RevokeAfter":         3 * time.Minute,
	"Guard.MaxRevokesPerHour":   5,
	"Guard.GrantBeforeMeasured": true,
	"Guard.PlanBelowConfigured": true,
	"Guard.MaxHold":             30 * time.Minute,
	"MaxWeight":                 7.0,
	"Identity.MaxJobs":          3,
	"Identity.MaxGPUPct":        50,
	"Identity.MaxMemoryMiB":     8192,
	"Identity.MaxWeight":        4.0,
	"Identity.MaxPriority":      5,
	"Identities":                []NamedIdentity{{Name: "ray", MaxJobs: 3}},
	"IdempotencyTTL":            time.Hour,
	"IdempotencyMax":            99,
	"SearchWorkers":             3,
}

// otherService is a service other than newHarness's, with its key filled
// in as Reconfigure fills it.
func otherService() ServiceSpec {
	p := inferenceProfile("bert")
	return ServiceSpec{Name: "bert", Profile: p, Key: p.Key(), RateRPS: 50, SLOP99MS: 1e6}
}

// TestHotFieldsAreWhatReconfigureChanges changes each Config field alone:
// a field in HotFields takes its new value at once, any other keeps its
// old one and is reported as needing a restart.
func TestHotFieldsAreWhatReconfigureChanges(t *testing.T) {
	t.Parallel()
	// Each leaf: its path below Config, the top-level field it is in, and
	// how to reach it in a Config.
	type leaf struct {
		path, top string
		index     []int
	}
	var leaves []leaf
	var walk func(typ reflect.Type, prefix, top string, index []int)
	walk = func(typ reflect.Type, prefix, top string, index []int) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			idx := append(slices.Clone(index), i)
			t := top
			if t == "" {
				t = f.Name
			}
			switch {
			case f.Anonymous:
				walk(f.Type, prefix, t, idx)
			case f.Type.Kind() == reflect.Struct && top != "":
				walk(f.Type, prefix+f.Name+".", t, idx)
			default:
				leaves = append(leaves, leaf{prefix + f.Name, t, idx})
			}
		}
	}
	walk(reflect.TypeFor[Config](), "", "", nil)
	for _, l := range leaves {
		t.Run(l.path, func(t *testing.T) {
			t.Parallel()
			v, ok := otherValue[l.path]
			if !ok {
				t.Fatalf("Config.%s has no other value in this test: say whether a reload applies it (hotFields)", l.path)
			}
			h := newHarness(t, predictor.ModeMPS, 1e6, nil)
			cfg := h.c.config()
			reflect.ValueOf(&cfg).Elem().FieldByIndex(l.index).Set(reflect.ValueOf(v))
			r, err := h.c.Reconfigure(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.ValueOf(h.c.config()).FieldByIndex(l.index).Interface()
			hot := slices.Contains(HotFields(), l.top)
			switch {
			case hot && (!reflect.DeepEqual(got, v) || !slices.Equal(r.Changed, []string{l.path}) || r.NeedRestart != nil):
				t.Errorf("hot field: now %v, changed %v, need restart %v; want %v, [%s], none", got, r.Changed, r.NeedRestart, v, l.path)
			case !hot && (reflect.DeepEqual(got, v) || r.Changed != nil || !slices.Equal(r.NeedRestart, []string{l.path})):
				t.Errorf("restart field: now %v, changed %v, need restart %v; want the old value, none, [%s]", got, r.Changed, r.NeedRestart, l.path)
			}
		})
	}
	if len(leaves) != len(otherValue) {
		t.Errorf("%d fields, %d other values: a value here names no field", len(leaves), len(otherValue))
	}
}

// TestReconfigureAppliesToTheNextDecision: a lower max_jobs or a larger
// memory reserve denies the next job, and leaves the live lease alone; an
// invalid config changes nothing.
func TestReconfigureAppliesToTheNextDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, predictor.ModeMPS, 1e6, nil)
	mustDecide(t, h, request("a"), Grant)

	bad := h.c.config()
	bad.MaxJobs = -1
	if _, err := h.c.Reconfigure(ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid max_jobs: %v", err)
	}
	mustDecide(t, h, request("b"), Grant)

	cfg := h.c.config()
	cfg.MaxJobs = 2
	if _, err := h.c.Reconfigure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if d := mustDecide(t, h, request("c"), Deny); d.Code != CodeMaxJobs {
		t.Errorf("after max_jobs 2: %s, want max_jobs", d.Code)
	}
	cfg.MaxJobs, cfg.MemoryReserveMiB = 4, h.dev.free // nothing left to grant
	if _, err := h.c.Reconfigure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if d := mustDecide(t, h, request("d"), Deny); d.Code != CodeInsufficientMemory {
		t.Errorf("after the reserve grew: %s, want insufficient_memory", d.Code)
	}
	if n := len(h.c.Leases()); n != 2 {
		t.Errorf("%d leases, want the 2 granted before: a reload revokes none for max_jobs or memory", n)
	}
}
