package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Launcher identities (docs/security.md#quotas): every request carries
// the identity the server authenticated (Request.Tenant, set by the
// sidecar, never read from the request's body), and each identity is held
// to what the operator gave it, not to what it claims. Its jobs' weight
// and priority are capped by its own max_weight and max_priority (by
// default every identity is equal: weight 1, priority 0), so that no
// launcher lowers another's running lease by declaring its job more
// valuable; and its leases, the sum of their percentages and their memory
// are bounded (by default half of admission.max_jobs, rounded up), so that
// no launcher can take every slot of the GPU with small leases and keep
// them by renewing. The bounds hold while the GPU is contended, when
// another identity may want it: one registered on this sidecar, one that
// asked within admission.lease.max, one that holds a lease or one with an
// admission.identities entry. A lone identity may fill the GPU. A request
// without an identity (the sidecar's own account: the operator, an
// in-process caller) has no such bound.

// IdentityLimits are what one launcher identity may hold on this GPU and
// claim for its jobs. Zero fields of an admission.identities entry take
// admission.identity's.
type IdentityLimits struct {
	// MaxJobs bounds its live co-located leases (0: half of
	// admission.max_jobs, rounded up).
	MaxJobs int `mapstructure:"max_jobs"`
	// MaxGPUPct bounds the sum of its leases' active-thread percentages
	// (MPS; 0, the default: no bound, as MPS percentages cap each client
	// and overlap rather than split the GPU).
	MaxGPUPct int `mapstructure:"max_gpu_pct"`
	// MaxMemoryMiB bounds the device memory its leases may pin (0: no
	// bound beyond the GPU's).
	MaxMemoryMiB int `mapstructure:"max_memory_mib"`
	// MaxWeight caps its jobs' job.weight (default 1).
	MaxWeight float64 `mapstructure:"max_weight"`
	// MaxPriority caps its jobs' job.priority (default 0; the lower bound
	// stays MinPriority: an identity may always put its own jobs last).
	MaxPriority int `mapstructure:"max_priority"`
}

// NamedIdentity is an admission.identities entry: the limits of one
// identity by its launcher name (`colocd launcher add NAME`), or by the
// user the server authenticated for identities from elsewhere.
type NamedIdentity struct {
	Name         string  `mapstructure:"name"`
	MaxJobs      int     `mapstructure:"max_jobs"`
	MaxGPUPct    int     `mapstructure:"max_gpu_pct"`
	MaxMemoryMiB int     `mapstructure:"max_memory_mib"`
	MaxWeight    float64 `mapstructure:"max_weight"`
	MaxPriority  int     `mapstructure:"max_priority"`
}

// limits are the entry's limits, as admission.identity's are.
func (n NamedIdentity) limits() IdentityLimits {
	return IdentityLimits{MaxJobs: n.MaxJobs, MaxGPUPct: n.MaxGPUPct, MaxMemoryMiB: n.MaxMemoryMiB, MaxWeight: n.MaxWeight, MaxPriority: n.MaxPriority}
}

// DefaultIdentity are admission.identity's defaults.
func DefaultIdentity() IdentityLimits {
	return IdentityLimits{MaxWeight: 1}
}

// check adds the limits' problems to c under prefix.
func (l IdentityLimits) check(c *fields, prefix string) {
	if l.MaxJobs < 0 {
		c.add(prefix+".max_jobs", "a count ≥ 0 (0: half of admission.max_jobs, rounded up)", fmt.Sprint(l.MaxJobs))
	}
	if l.MaxGPUPct < 0 || l.MaxGPUPct > 100*MaxDefaultJobs {
		c.add(prefix+".max_gpu_pct", fmt.Sprintf("a sum of percentages from 0 to %d (0: no bound)", 100*MaxDefaultJobs), fmt.Sprint(l.MaxGPUPct))
	}
	if l.MaxMemoryMiB < 0 {
		c.add(prefix+".max_memory_mib", "a size in MiB ≥ 0 (0: no bound)", fmt.Sprint(l.MaxMemoryMiB))
	}
	if !(l.MaxWeight >= 0 && l.MaxWeight <= MaxWeight) {
		c.add(prefix+".max_weight", "a weight from 0 to 1000 (0: admission.identity's)", fmt.Sprint(l.MaxWeight))
	}
	if l.MaxPriority < MinPriority || l.MaxPriority > MaxPriority {
		c.add(prefix+".max_priority", fmt.Sprintf("an integer in [%d, %d]", MinPriority, MaxPriority), fmt.Sprint(l.MaxPriority))
	}
}

// MaxDefaultJobs bounds max_gpu_pct's range: a hundred percent for each
// of this many jobs is more than any GPU runs.
const MaxDefaultJobs = 64

// checkIdentities adds the problems of admission.identity and
// admission.identities to c.
func (s Settings) checkIdentities(c *fields) {
	s.Identity.check(c, "admission.identity")
	if s.Identity.MaxWeight < 1 {
		c.add("admission.identity.max_weight", "a weight from 1 to 1000", fmt.Sprint(s.Identity.MaxWeight))
	}
	seen := map[string]int{}
	for i, id := range s.Identities {
		prefix := fmt.Sprintf("admission.identities[%d]", i)
		switch j, dup := seen[id.Name]; {
		case strings.TrimSpace(id.Name) == "" || len(id.Name) > maxTenantName:
			c.add(prefix+".name", fmt.Sprintf("a launcher name or an authenticated user, 1 to %d characters", maxTenantName), fmt.Sprintf("%q", truncate(id.Name)))
		case dup:
			c.add(prefix+".name", fmt.Sprintf("a name no other entry has (admission.identities[%d] is %q)", j, id.Name), fmt.Sprintf("%q", id.Name))
		default:
			seen[id.Name] = i
		}
		id.limits().check(c, prefix)
	}
}

// maxTenantName bounds an identity's name: an NKey is 56 characters.
const maxTenantName = 256

// limitsOf returns the limits of identity tenant: its admission.identities
// entry over admission.identity, with max_jobs resolved. ok is false for a
// request without an identity (tenant ""), which has none.
func (s Settings) limitsOf(tenant string) (IdentityLimits, bool) {
	if tenant == "" {
		return IdentityLimits{}, false
	}
	l := s.Identity
	for _, id := range s.Identities {
		if id.Name != tenant {
			continue
		}
		o := id.limits()
		if o.MaxJobs > 0 {
			l.MaxJobs = o.MaxJobs
		}
		if o.MaxGPUPct > 0 {
			l.MaxGPUPct = o.MaxGPUPct
		}
		if o.MaxMemoryMiB > 0 {
			l.MaxMemoryMiB = o.MaxMemoryMiB
		}
		if o.MaxWeight > 0 {
			l.MaxWeight = o.MaxWeight
		}
		if o.MaxPriority != 0 {
			l.MaxPriority = o.MaxPriority
		}
		break
	}
	if l.MaxJobs == 0 {
		l.MaxJobs = (s.MaxJobs + 1) / 2
	}
	return l, true
}

// capClaims lowers req's weight and priority to what its identity may
// claim, and says so (nil when nothing was capped).
func (s Settings) capClaims(req *Request) []string {
	l, ok := s.limitsOf(req.Tenant)
	if !ok {
		return nil
	}
	var notes []string
	if w := req.weight(); w > l.MaxWeight {
		notes = append(notes, fmt.Sprintf("job.weight %g counts as %g, the most this launcher identity may claim", w, l.MaxWeight))
		req.Weight = l.MaxWeight
	}
	if req.Priority > l.MaxPriority {
		notes = append(notes, fmt.Sprintf("job.priority %d counts as %d, the most this launcher identity may claim", req.Priority, l.MaxPriority))
		req.Priority = l.MaxPriority
	}
	return notes
}

// weight is the request's weight (0: 1).
func (r *Request) weight() float64 {
	if r.Weight == 0 {
		return 1
	}
	return r.Weight
}

// holding is what one identity's live co-located leases hold.
type holding struct {
	jobs, pct, memoryMiB int
}

// holdingOf sums tenant's leases among live.
func holdingOf(live []liveLease, tenant string) holding {
	var h holding
	for _, l := range live {
		if l.lease.Tenant == tenant {
			h.jobs++
			h.pct += l.lease.Pct
			h.memoryMiB += l.lease.MemoryMiB
		}
	}
	return h
}

// rivals are the identities that may want this GPU besides its leases'
// holders: those registered on the sidecar (SetIdentities) and those that
// asked lately.
type rivals struct {
	known map[string]bool
	seen  map[string]time.Time // by when it last asked
}

// maxSeen bounds the identities remembered for having asked: past it, the
// oldest is forgotten.
const maxSeen = 1024

// see notes that tenant asked at now, forgetting what asked before
// now-keep.
func (r *rivals) see(tenant string, now time.Time, keep time.Duration) {
	if tenant == "" {
		return
	}
	if r.seen == nil {
		r.seen = map[string]time.Time{}
	}
	if _, ok := r.seen[tenant]; !ok && len(r.seen) >= maxSeen {
		oldest, at := "", now
		for t, when := range r.seen {
			if when.Before(now.Add(-keep)) {
				delete(r.seen, t)
			} else if when.Before(at) {
				oldest, at = t, when
			}
		}
		if len(r.seen) >= maxSeen {
			delete(r.seen, oldest)
		}
	}
	r.seen[tenant] = now
}

// names lists the rivals at now, with keep as in see.
func (r *rivals) names(now time.Time, keep time.Duration) []string {
	out := make([]string, 0, len(r.known)+len(r.seen))
	for t := range r.known {
		out = append(out, t)
	}
	for t, when := range r.seen {
		if !r.known[t] && !when.Before(now.Add(-keep)) {
			out = append(out, t)
		}
	}
	return out
}

// SetIdentities makes names the launcher identities registered on this
// sidecar: each one contends for the GPU whether or not it has asked yet
// (docs/security.md#quotas).
func (c *Controller) SetIdentities(names []string) {
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
	}
	c.mu.Lock()
	c.rivals.known = known
	c.mu.Unlock()
}

// contended tells whether an identity other than tenant may want the GPU
// of v, when tenant's quota binds.
func (pol *policy) contended(tenant string, v *view) bool {
	other := func(t string) bool { return t != "" && t != tenant }
	for _, l := range v.live {
		if other(l.lease.Tenant) {
			return true
		}
	}
	for _, id := range pol.cfg.Identities {
		if other(id.Name) {
			return true
		}
	}
	return slices.ContainsFunc(v.rivals, other)
}

// quota returns the deny of a request its identity's quota leaves no room
// for, and top, the highest percentage it may be granted (MPS: what is
// left of max_gpu_pct).
func (pol *policy) quota(req *Request, v *view) (d Decision, denied bool, top int) {
	top = req.MaxPct
	l, ok := pol.cfg.limitsOf(req.Tenant)
	if !ok || !pol.contended(req.Tenant, v) {
		return Decision{}, false, top
	}
	live := v.live
	h := holdingOf(live, req.Tenant)
	deny := func(what string) (Decision, bool, int) {
		return Decision{Outcome: Deny, Code: CodeIdentityQuota, Message: fmt.Sprintf("this launcher identity holds %d of this GPU's %d leases "+
			"(%d %% of its threads, %d MiB); %s", h.jobs, len(live), h.pct, h.memoryMiB, what)}, true, 0
	}
	switch {
	case h.jobs >= l.MaxJobs:
		return deny(fmt.Sprintf("its quota is %d leases (admission.identity.max_jobs or its admission.identities entry)", l.MaxJobs))
	case l.MaxMemoryMiB > 0 && h.memoryMiB+req.memoryMiB() > l.MaxMemoryMiB:
		return deny(fmt.Sprintf("%d MiB more would pass its quota of %d MiB (max_memory_mib)", req.memoryMiB(), l.MaxMemoryMiB))
	}
	if pol.cfg.Mode == predictor.ModeMPS && l.MaxGPUPct > 0 {
		left := l.MaxGPUPct - h.pct
		if left < req.MinPct {
			return deny(fmt.Sprintf("its quota is %d %% of the threads in all (max_gpu_pct), %d %% left, below the job's min_pct %d", l.MaxGPUPct, max(0, left), req.MinPct))
		}
		top = min(top, left)
	}
	return Decision{}, false, top
}

// capRaises lowers planned percentages (pcts, by live's order) where a
// raise would take an identity past its max_gpu_pct: the raises of its
// newest leases go first, none below the lease's percentage now, and a
// raise cut below admission.guard.min_move_pct is none.
func (pol *policy) capRaises(v *view, pcts []int) []int {
	live := v.live
	out := slices.Clone(pcts)
	planned := map[string]int{}
	for i, e := range live {
		planned[e.lease.Tenant] += out[i]
	}
	for i := len(live) - 1; i >= 0; i-- {
		e := &live[i].lease
		l, ok := pol.cfg.limitsOf(e.Tenant)
		if !ok || l.MaxGPUPct == 0 || out[i] <= e.Pct || !pol.contended(e.Tenant, v) {
			continue
		}
		if over := planned[e.Tenant] - l.MaxGPUPct; over > 0 {
			cut := min(over, out[i]-e.Pct)
			if out[i]-cut-e.Pct < pol.cfg.Guard.MinMovePct {
				cut = out[i] - e.Pct // a raise too small to restart for
			}
			out[i] -= cut
			planned[e.Tenant] -= cut
		}
	}
	return out
}

// RevokeIdentity revokes every live lease of identity tenant, with
// admission.guard.deadline to stop, as a guard's revoke: what the
// operator does by removing the identity (`colocd launcher remove`). A
// lease stays the identity's whoever holds its token: once revoked it is
// renewed only until its deadline. It returns the revoke events,
// published.
func (c *Controller) RevokeIdentity(ctx context.Context, tenant string) ([]Event, error) {
	if tenant == "" {
		return nil, nil
	}
	return c.revokeOperator(ctx, func(l *Lease) bool { return l.Tenant == tenant }, nil, planWhy{op: "revoke for a removed identity",
		revoke: "the operator removed launcher identity " + tenant + ": its leases end"})
}

// revokeOperator revokes every live lease pick chooses, with
// admission.guard.deadline to stop, for the operator's reason why, and
// publishes the revokes: a removed identity's leases, or a drain's.
// first, when set, runs under the lock before the leases are read.
func (c *Controller) revokeOperator(ctx context.Context, pick func(*Lease) bool, first func(), why planWhy) ([]Event, error) {
	c.mu.Lock()
	if first != nil {
		first()
	}
	s := c.snapshotLocked()
	planned := append(slices.Clone(s.live), s.lent...)
	p := plan{pcts: currentPcts(planned), revoked: make([]bool, len(planned))}
	n := 0
	for i, e := range planned {
		if !e.lease.Revoked && pick(&e.lease) {
			p.revoked[i] = true
			n++
		}
	}
	if n == 0 {
		c.mu.Unlock()
		return nil, nil
	}
	now := c.now()
	why.deadline = now.Add(c.cfg.Guard.Deadline)
	events, serr := c.applyPlan(ctx, planned, p, now, why)
	c.mu.Unlock()
	c.signal()
	perr := c.publish(ctx, events)
	return events, errors.Join(serr, perr)
}
