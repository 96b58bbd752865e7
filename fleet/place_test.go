package fleet

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
)

// fakeQuoter is a fleet of summaries with fixed quotes and admits, which
// records what Place asked of it.
type fakeQuoter struct {
	caps   []*Capacity
	quotes map[string]*v1.Decision // by sidecar asked; absent: no answer
	forged []*v1.Decision          // answers in the name of a sidecar not asked
	admits map[string]*v1.Decision // by sidecar; absent: a 503

	mu            sync.Mutex
	asked         []string
	quoteDeadline time.Duration // the time the quotes were given
}

func (f *fakeQuoter) Capacities(context.Context) ([]*Capacity, []error, error) {
	return f.caps, nil, nil
}

func (f *fakeQuoter) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Minute)
}

func (f *fakeQuoter) QuoteEach(ctx context.Context, _ *v1.AdmitRequest, sidecars []string) []*v1.Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = slices.Clone(sidecars)
	if dl, ok := ctx.Deadline(); ok {
		f.quoteDeadline = time.Until(dl)
	}
	var out []*v1.Decision
	for _, id := range sidecars {
		if d := f.quotes[id]; d != nil {
			out = append(out, d)
		}
	}
	return append(out, f.forged...)
}

func (f *fakeQuoter) Admit(_ context.Context, sidecar string, _ *v1.AdmitRequest) (*v1.Decision, error) {
	if d := f.admits[sidecar]; d != nil {
		return d, nil
	}
	return nil, &v1.Error{Code: v1.CodeUnavailable, Description: "busy"}
}

func decision(sidecar, outcome string, pct int) *v1.Decision {
	return &v1.Decision{Sidecar: sidecar, Decision: outcome, ActiveThreadPct: pct}
}

// Place ranks the summaries, quotes the best K, admits at the best quote
// and, when that admit is lost, at the next; an answer in the name of a
// sidecar it did not ask is not an offer. The quotes get half the time
// left.
func TestPlaceAsksThroughTheQuoter(t *testing.T) {
	t.Parallel()
	sick, full := testCapacity("gpu-sick"), testCapacity("gpu-full")
	sick.Healthy = false
	full.Leases = full.MaxJobs
	a, b, e := testCapacity("gpu-a"), testCapacity("gpu-b"), testCapacity("gpu-e")
	b.TypicalPct, e.TypicalPct = 80, 50
	q := &fakeQuoter{
		caps:   []*Capacity{a, sick, b, full, e},
		quotes: map[string]*v1.Decision{"gpu-a": decision("gpu-a", v1.DecisionGrant, 60), "gpu-b": decision("gpu-b", v1.DecisionThrottle, 40)},
		forged: []*v1.Decision{decision("gpu-e", v1.DecisionGrant, 100)},
		admits: map[string]*v1.Decision{"gpu-a": decision("gpu-a", v1.DecisionDeny, 0), "gpu-b": decision("gpu-b", v1.DecisionThrottle, 40)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := Place(ctx, q, &v1.AdmitRequest{MemoryMiB: 1000}, PlaceOptions{K: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.Sidecar != "gpu-b" || p.Decision.Decision != v1.DecisionThrottle {
		t.Errorf("placed on %q (%+v), want gpu-b after gpu-a's admit was lost", p.Sidecar, p.Decision)
	}
	if want := []string{"gpu-b", "gpu-a", "gpu-e"}; !slices.Equal(p.Candidates, want) {
		t.Errorf("candidates %v, want %v", p.Candidates, want)
	}
	if want := []string{"gpu-b", "gpu-a"}; !slices.Equal(q.asked, want) {
		t.Errorf("quoted %v, want %v", q.asked, want)
	}
	if want := []string{"gpu-a", "gpu-b"}; !slices.Equal(p.Tried, want) {
		t.Errorf("tried %v, want %v (the highest percentage first)", p.Tried, want)
	}
	if len(p.Quotes) != 2 || p.Summaries != 5 || p.Requests != 5 {
		t.Errorf("%d quotes, %d summaries, %d requests: want 2, 5 and 5", len(p.Quotes), p.Summaries, p.Requests)
	}
	if q.quoteDeadline <= 0 || q.quoteDeadline > 5*time.Second {
		t.Errorf("the quotes were given %v, want at most half of 10 s", q.quoteDeadline)
	}
}

// When every quote denies, Place says so with each one's reason, the
// closest to a grant first; no sidecar on the node asked for is no
// sidecar.
func TestPlaceWithoutAnOffer(t *testing.T) {
	t.Parallel()
	over := func(id string, ratio float64) *v1.Decision {
		d := decision(id, v1.DecisionDeny, 0)
		d.Reason = v1.Reason{Code: "slo", Message: "over " + id}
		d.Predictions = []v1.ServicePrediction{{Service: "bert", SLOP99MS: 10, PredictedP99MS: 10 * ratio}}
		return d
	}
	q := &fakeQuoter{
		caps:   []*Capacity{testCapacity("gpu-a"), testCapacity("gpu-b")},
		quotes: map[string]*v1.Decision{"gpu-a": over("gpu-a", 3), "gpu-b": over("gpu-b", 1.5)},
	}
	_, err := Place(context.Background(), q, &v1.AdmitRequest{}, PlaceOptions{})
	if !errors.Is(err, ErrEveryQuoteDenied) || !strings.Contains(err.Error(), "gpu-b: slo: over gpu-b; gpu-a: slo: over gpu-a") {
		t.Errorf("every quote denied: %v", err)
	}
	if _, err := Place(context.Background(), q, &v1.AdmitRequest{}, PlaceOptions{Node: "node-9"}); !errors.Is(err, v1.ErrNoSidecar) {
		t.Errorf("no sidecar on the node: %v, want ErrNoSidecar", err)
	}
}
