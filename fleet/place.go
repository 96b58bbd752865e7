package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/termtext"
)

// DefaultPlaceK is how many of the best-ranked sidecars Place quotes.
const DefaultPlaceK = 3

// PlaceOptions tune Place.
type PlaceOptions struct {
	// K is how many of the best-ranked sidecars are quoted (0:
	// DefaultPlaceK).
	K int
	// Node, when set, keeps only the sidecars whose summary names that
	// node: a Kubernetes pod places itself on the GPU of its own node.
	Node string
}

// Placement is what Place did.
type Placement struct {
	// Decision is the admit that placed the job (a grant or throttle), on
	// Sidecar; nil when no sidecar took it.
	Decision *v1.Decision
	Sidecar  string
	// Summaries is how many live summaries were read, Candidates how many
	// of them could take the job, in rank order.
	Summaries  int
	Candidates []string
	// Quotes are the answers of the quoted sidecars, as they came; Tried
	// the sidecars admitted at, in order (a lost race tries the next).
	Quotes []*v1.Decision
	Tried  []string
	// Requests counts the NATS requests Place sent (one read of the
	// summaries per shard read, the quotes, the admits).
	Requests int
}

// ErrEveryQuoteDenied is Place's error when every quoted sidecar denied
// the job; the error's text gives each one's reason, the closest to a
// grant first.
var ErrEveryQuoteDenied = errors.New("every quoted sidecar denied the job")

// ErrEveryOfferLost is Place's error when every sidecar that offered a slot
// denied the admit, or was busy, by the time it came (lost races).
var ErrEveryOfferLost = errors.New("every offer was lost")

// Quoter is what Place asks the fleet through; *bus.Client is one. Place
// needs no more of a client than these, so that placement stays the
// fleet's and the transport stays a transport.
type Quoter interface {
	// Capacities reads every live capacity summary of the fleet, those
	// that do not decode as errors beside the good ones.
	Capacities(ctx context.Context) ([]*Capacity, []error, error)
	// Bound gives ctx the client's timeout when it has no deadline.
	Bound(ctx context.Context) (context.Context, context.CancelFunc)
	// QuoteEach asks each of sidecars for a quote at once and returns the
	// answers that name their sidecar, as they come, until all answered or
	// ctx ends; it returns once every quote has ended.
	QuoteEach(ctx context.Context, req *v1.AdmitRequest, sidecars []string) []*v1.Decision
	// Admit asks one sidecar for a slot; a deny is a Decision, not an
	// error.
	Admit(ctx context.Context, sidecar string, req *v1.AdmitRequest) (*v1.Decision, error)
}

// Place puts the job on the fleet's best GPU without asking every one:
// it reads every sidecar's capacity summary (q.Capacities), ranks the
// sidecars that could take the job, quotes the best K in parallel, and
// stops as soon as all K answered or ctx ends, never waiting out a fixed
// window. It admits at the best quote (the policy in docs/fleet.md: a free
// MIG instance, then the highest percentage, then the widest margin, then
// rank) and, on a lost race (a deny, or a busy sidecar), at the next. An
// error that leaves the admit's outcome unknown (a timeout) ends it: the
// caller retries there with the same request_id, never elsewhere. With no
// candidate, no quote that grants, or every admit lost, Decision is nil
// and the error says why (ErrNoSidecar when no sidecar could take it).
func Place(ctx context.Context, q Quoter, req *v1.AdmitRequest, opts PlaceOptions) (*Placement, error) {
	k := opts.K
	if k <= 0 {
		k = DefaultPlaceK
	}
	// The admits use these; the quotes need a request_id too.
	req.Prepare()
	caps, _, err := q.Capacities(ctx)
	if err != nil {
		return nil, fmt.Errorf("place: %w", err)
	}
	p := &Placement{Summaries: len(caps), Requests: 1}
	if opts.Node != "" {
		caps = slices.DeleteFunc(caps, func(cp *Capacity) bool { return cp.Node != opts.Node })
		if len(caps) == 0 {
			return p, fmt.Errorf("place: none of %d sidecars is on node %q: %w", p.Summaries, termtext.Clip(opts.Node), v1.ErrNoSidecar)
		}
	}
	ranked := RankCapacities(caps, req.MemoryMiB)
	byID := map[string]*Capacity{}
	for _, cp := range ranked {
		p.Candidates = append(p.Candidates, cp.Sidecar)
		byID[cp.Sidecar] = cp
	}
	if len(ranked) == 0 {
		return p, fmt.Errorf("place: none of %d sidecars can take the job now: %w", len(caps), v1.ErrNoSidecar)
	}
	asked := ranked[:min(k, len(ranked))]
	p.Quotes = quoteEach(ctx, q, req, asked)
	p.Requests += len(asked)
	offers := slices.DeleteFunc(slices.Clone(p.Quotes), func(d *v1.Decision) bool { return d.Decision == v1.DecisionDeny })
	rank := map[string]int{}
	for i, cp := range asked {
		rank[cp.Sidecar] = i
	}
	slices.SortStableFunc(offers, func(a, b *v1.Decision) int {
		return cmp.Or(
			cmp.Compare(boolRank(b.Reason.Code == "free_instance"), boolRank(a.Reason.Code == "free_instance")),
			cmp.Compare(b.ActiveThreadPct, a.ActiveThreadPct),
			cmp.Compare(byID[b.Sidecar].Margin, byID[a.Sidecar].Margin),
			cmp.Compare(rank[a.Sidecar], rank[b.Sidecar]))
	})
	var errs []error
	for _, o := range offers {
		p.Tried = append(p.Tried, o.Sidecar)
		p.Requests++
		d, err := q.Admit(ctx, o.Sidecar, req)
		switch {
		case err == nil && d.Decision != v1.DecisionDeny:
			p.Decision, p.Sidecar = d, o.Sidecar
			return p, nil
		case err == nil:
			errs = append(errs, fmt.Errorf("%s: denied (%s) after quoting %s", o.Sidecar, d.Reason.Code, o.Decision))
		case v1.CodeOf(err) == v1.CodeUnavailable:
			errs = append(errs, fmt.Errorf("%s: %w", o.Sidecar, err))
		default:
			return p, fmt.Errorf("place: admit on %s: %w", o.Sidecar, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(offers) == 0 && len(p.Quotes) > 0 {
		return p, fmt.Errorf("place: %w (%d of %d answered): %s", ErrEveryQuoteDenied, len(p.Quotes), len(asked), denyReasons(p.Quotes))
	}
	if len(offers) == 0 {
		return p, fmt.Errorf("place: none of the %d quoted sidecars answered: %w", len(asked), v1.ErrNoSidecar)
	}
	return p, fmt.Errorf("place: %w: %w", ErrEveryOfferLost, errors.Join(errs...))
}

// denyReasons gives each deny's sidecar, code and message, the closest to
// a grant first: the one whose worst service is least over its SLO (a
// deny for memory or slots, which has no prediction over, after).
func denyReasons(denies []*v1.Decision) string {
	ds := slices.Clone(denies)
	slices.SortStableFunc(ds, func(a, b *v1.Decision) int { return cmp.Compare(overshoot(a), overshoot(b)) })
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s: %s", termtext.Clip(d.Sidecar), termtext.Clip(d.Reason.Code), clipAt(d.Reason.Message, 1024))
	}
	return b.String()
}

// clipAt cuts s to n bytes, at a rune's start, and marks the cut.
func clipAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// overshoot is how far a deny's worst prediction is over its SLO (its
// p99 over the SLO, 1 at the SLO); +Inf when it carries none.
func overshoot(d *v1.Decision) float64 {
	worst := math.Inf(-1)
	for _, p := range d.Predictions {
		if p.SLOP99MS > 0 {
			worst = max(worst, p.PredictedP99MS/p.SLOP99MS)
		}
	}
	if math.IsInf(worst, -1) {
		return math.Inf(1)
	}
	return worst
}

// quoteEach asks each sidecar for a quote at once and returns the answers
// as they come, until all answered or half the time left passed (the rest
// is the admits'); a sidecar that errs, or an answer in the name of one not
// asked, answers nothing. It returns once every quote has ended.
func quoteEach(ctx context.Context, q Quoter, req *v1.AdmitRequest, caps []*Capacity) []*v1.Decision {
	qctx, cancel := q.Bound(ctx)
	defer cancel()
	if dl, ok := qctx.Deadline(); ok {
		var cancelHalf context.CancelFunc
		qctx, cancelHalf = context.WithTimeout(qctx, time.Until(dl)/2)
		defer cancelHalf()
	}
	ids := make([]string, len(caps))
	for i, cp := range caps {
		ids[i] = cp.Sidecar
	}
	// An answer in the name of a sidecar not asked counts for none.
	return slices.DeleteFunc(q.QuoteEach(qctx, req, ids), func(d *v1.Decision) bool { return d == nil || !slices.Contains(ids, d.Sidecar) })
}

// RankCapacities orders the sidecars that could take a job of memMiB (0:
// unknown) now: healthy, with room for one more lease or a free MIG
// instance, and the memory. A free instance first; then the highest
// typical_pct, the widest margin, the most free memory, and the id.
func RankCapacities(caps []*Capacity, memMiB int) []*Capacity {
	var out []*Capacity
	for _, cp := range caps {
		if !cp.Healthy || cp.FreeInstances == 0 && (cp.Leases >= cp.MaxJobs || cp.FreeMemoryMiB < memMiB) {
			continue
		}
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b *Capacity) int {
		return cmp.Or(
			cmp.Compare(boolRank(b.FreeInstances > 0), boolRank(a.FreeInstances > 0)),
			cmp.Compare(b.TypicalPct, a.TypicalPct),
			cmp.Compare(b.Margin, a.Margin),
			cmp.Compare(b.FreeMemoryMiB, a.FreeMemoryMiB),
			cmp.Compare(a.Sidecar, b.Sidecar))
	})
	return out
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
