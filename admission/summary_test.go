package admission

import (
	"context"
	"testing"

	"github.com/colocd/colocd/predictor"
)

// A summary says what a typical job would get now, and moves with the
// leases, the device and the lent instances.
func TestSummarize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, fi := newLendHarness(t, instance3g())
	typical := request("typical")
	sum, err := h.c.Summarize(ctx, typical)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Healthy || sum.Leases != 0 || sum.MaxJobs != 4 || sum.FreeInstances != 1 || sum.TypicalPct != 100 || sum.AvailableMiB != 80000-2048 ||
		len(sum.Margins) != 1 || !(sum.Margin > 0 && sum.Margin < 1) {
		t.Fatalf("empty GPU: %s (%+v)", sum, sum)
	}
	before := sum.Margin
	mustDecide(t, h, request("lent"), Grant)
	shared := mustDecide(t, h, request("shared"), Grant)
	if sum, err = h.c.Summarize(ctx, typical); err != nil {
		t.Fatal(err)
	}
	if sum.Leases != 1 || sum.FreeInstances != 0 || sum.Margin >= before || sum.AvailableMiB != 80000-2048-shared.Lease.MemoryMiB {
		t.Errorf("with a lent and a co-located job: %s; want 1 co-located lease, no free instance, less margin than %.3f, less memory", sum, before)
	}
	fi.set(0, func(i *Instance) {})
	h.dev.mu.Lock()
	h.dev.bad = "XID 79"
	h.dev.mu.Unlock()
	if sum, err = h.c.Summarize(ctx, typical); err != nil || sum.Healthy || sum.TypicalPct != 0 {
		t.Errorf("unhealthy GPU: %s, %v", sum, err)
	}
}

// A typical job that does not fit is a 0.
func TestSummarizeNoRoom(t *testing.T) {
	t.Parallel()
	h := newHarness(t, predictor.ModeMPS, 0.5, nil) // an SLO nothing meets
	sum, err := h.c.Summarize(context.Background(), request("typical"))
	if err != nil || sum.TypicalPct != 0 || sum.Margin >= 0 || !sum.Healthy {
		t.Errorf("%s, %v: want healthy, no room, a negative margin", sum, err)
	}
}
