package admission

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/colocd/colocd/predictor"
)

// Controller admits training jobs onto one GPU and keeps their leases.
// It owns the lease book: the leases and their store, expiry, idempotency,
// snapshots and commits, events. What to decide is its policy's (policy.go):
// each decision, re-plan and raise is the policy's answer on a snapshot,
// which the controller applies.
//
// A decision predicts every inference service with the live leases as
// trainers at their percentages plus the candidate. Each service is predicted
// alone with the trainers: the predictor has one inference context, so other
// inference services on the same GPU are not modelled as co-runners of each
// other (their SLOs are checked one by one). Lease changes and expiry are
// serialized by one mutex, held briefly; predictions run outside it, on a
// snapshot, and a decision commits under it only if the snapshot is still
// current (snapshot.go), so two racing requests never both take the last
// capacity and no prediction delays a renew.
type Controller struct {
	deps Deps
	log  *slog.Logger
	wake chan struct{} // a lease's expiry may have moved earlier

	mu        sync.Mutex
	written   *sync.Cond          // on mu: an entry's store write ended (write.go)
	gen       uint64              // moves on every change a decision relies on (snapshot.go)
	freed     uint64              // moves on every change that may free capacity (snapshot.go)
	cfg       Config              // the hot fields change on Reconfigure (reconfigure.go)
	leases    map[string]*entry   // by lease id
	byRequest map[[32]byte]string // request id's hash → lease id, live leases
	idem      idempotency
	rivals    rivals // the identities that may want the GPU (identity.go)
	drain     *Drain // the operator's drain in force (drain.go); nil: none
	g         guard  // the guard's state and its steps (guard.go)
}

// now is the controller's time (Deps.Clock).
func (c *Controller) now() time.Time {
	if c.deps.Clock != nil {
		return c.deps.Clock()
	}
	return time.Now()
}

// validate validates req and returns its profile's key. A request that
// brings its profile's key brings a profile validated at the edge.
func (c *Controller) validate(req *Request) (predictor.ProfileKey, error) {
	if req.Profile == nil {
		return predictor.ProfileKey{}, req.Validate() // names the missing profile
	}
	vouched := req.ProfileKey != (predictor.ProfileKey{})
	return req.profileKey(), req.validate(vouched)
}

// entry is a lease in the book: the lease and its profile's key, and
// whether its record is being written.
type entry struct {
	liveLease
	// writing: the lease's record is being written, without c.mu; only
	// that writer changes the lease until it clears this (write.go).
	writing bool
}

// New checks cfg (after defaults) and deps and returns a controller with no
// leases; call Restore to load the stored ones, and Run for expiry.
func New(cfg Config, deps Deps) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new admission controller: %w", err)
	}
	cfg = cfg.withDefaults()
	var missing []string
	for _, d := range []struct {
		name string
		nil  bool
	}{
		{"Device", deps.Device == nil}, {"Store", deps.Store == nil}, {"Events", deps.Events == nil},
		{"Predictor", deps.Predictor == nil}, {"Daemon (mps mode)", deps.Daemon == nil && cfg.Mode == predictor.ModeMPS},
	} {
		if d.nil {
			missing = append(missing, d.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("new admission controller: missing dependencies: %v", missing)
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		deps: deps, log: logger, wake: make(chan struct{}, 1),
		cfg: cfg, leases: map[string]*entry{}, byRequest: map[[32]byte]string{},
		idem: idempotency{ttl: cfg.IdempotencyTTL, max: cfg.IdempotencyMax, byID: map[[32]byte]*idemEntry{}},
	}
	c.written = sync.NewCond(&c.mu)
	c.g.c = c
	return c, nil
}

// Decide answers a request: grant, throttle or deny, and for the first two a
// new lease. The steps (docs/admission.md): validate; return the remembered
// decision for a recent request_id; check the GPU and (MPS) daemon health;
// max jobs; memory; then predict and search the percentage grid. All but
// the first two run on a snapshot, without the controller's lock; the
// grant is committed only if the leases and config are still the
// snapshot's, else the request is evaluated again (see snapshot.go).
//
// ctx's deadline, capped by Config.DecisionTimeout, bounds the decision; if
// it passes before the commit nothing is granted.
//
// Errors: ErrInvalid (bad request, or a profile the predictor cannot
// simulate within its event cap), ErrRequestIDReused or ErrConflict (409),
// ErrUnavailable (503; the returned Decision is then a deny whose Code says
// which component is unhealthy, or CodeBusy), ErrTimeout (504), or the
// context's error when it was cancelled.
func (c *Controller) Decide(ctx context.Context, req Request) (Decision, error) {
	key, err := c.validate(&req)
	if err != nil {
		return Decision{}, err
	}
	if req.TokenHash == ([32]byte{}) {
		var f fields
		f.add("token_sha256", "the SHA-256 of a lease token of at least 128 bits that the launcher drew and keeps", "none")
		return Decision{}, f.err("request")
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	// Throttles that made room for the job (commitRoomLocked) are
	// published whatever the decision: they were stored.
	var events []Event
	defer func() {
		if len(events) > 0 {
			c.signal()
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
			defer cancel()
			_ = c.publish(pctx, events) // logged there; the leases were stored
		}
	}()
	fp, rk := req.fingerprint(key), requestKey(req.Tenant, req.RequestID)
	c.mu.Lock()
	attempts := c.admitAttemptsLocked()
	c.rivals.see(req.Tenant, c.now(), c.cfg.Lease.Max)
	c.mu.Unlock()
	for range attempts {
		c.mu.Lock()
		d, done, err := c.recalledLocked(rk, fp, c.now())
		var s *snapshot
		if !done && err == nil {
			s = c.snapshotLocked()
		}
		c.mu.Unlock()
		if done || err != nil {
			return d, err
		}
		if d, err = s.pol.decide(ctx, &req, key, &s.view); err != nil {
			return d, err
		}
		c.mu.Lock()
		var evs []Event
		d, done, evs, err = c.commitLocked(ctx, s, &req, key, rk, fp, d)
		c.mu.Unlock()
		events = append(events, evs...)
		if done || err != nil {
			return d, err
		}
	}
	return unavailable(CodeBusy, fmt.Sprintf("the leases or the configuration changed while each of %d evaluations in a row predicted; retry", attempts))
}

// recalledLocked returns the remembered decision of a recent request_id
// (done), ErrRequestIDReused, or ErrConflict when the request_id already
// holds a lease whose decision was forgotten. c.mu is held.
func (c *Controller) recalledLocked(rk, fp [32]byte, now time.Time) (Decision, bool, error) {
	if d, ok, err := c.idem.lookup(rk, fp, now); ok || err != nil {
		return d, true, err
	}
	if id, ok := c.byRequest[rk]; ok {
		if e := c.leases[id]; e != nil && e.writing {
			// A concurrent request with this request_id is storing its
			// grant: wait for its decision.
			c.waitWrittenLocked(e)
			return c.recalledLocked(rk, fp, c.now())
		}
		return Decision{}, true, fmt.Errorf("%w: the request_id already holds lease %s, granted before its decision was forgotten (a restart, or more than %d recent requests); renew it with its token",
			ErrConflict, id, c.cfg.IdempotencyMax)
	}
	return Decision{}, false, nil
}

// commitLocked applies decision d, evaluated on s: it grants nothing once
// ctx is done; returns the decision a concurrent request with the same
// request_id committed meanwhile; and returns done = false, changing
// nothing, when the leases or the config moved since s. Otherwise it
// lowers the live leases d's joint allocation lowers (their throttle
// events are returned; done = false when that did not go through whole,
// see commitRoomLocked), creates the lease of a grant or throttle and
// remembers the decision. c.mu is held (and released while a store write
// is waited for or made).
func (c *Controller) commitLocked(ctx context.Context, s *snapshot, req *Request, key predictor.ProfileKey, rk, fp [32]byte, d Decision) (Decision, bool, []Event, error) {
	if err := ctxErr("decide", ctx); err != nil {
		return Decision{}, true, nil, err
	}
	if d, done, err := c.recalledLocked(rk, fp, c.now()); done || err != nil {
		return d, true, nil, err
	}
	now := c.now() // recalledLocked may have waited
	if !c.unchangedLocked(s, now) && (d.Outcome != Deny || !c.onlyTakenLocked(s, now)) {
		return Decision{}, false, nil, nil
	}
	var events []Event
	if d.Outcome != Deny && d.Joint != nil {
		evs, ok, err := c.commitRoomLocked(ctx, s, d, now)
		events = evs
		if err != nil && ctx.Err() != nil {
			return Decision{}, true, events, ctxErr("decide", ctx)
		}
		if err != nil {
			d, err := unavailable(CodeStoreUnavailable, "lowering the live leases to make room failed, so nothing was granted: "+err.Error())
			return d, true, events, err
		}
		if !ok {
			return Decision{}, false, events, nil
		}
		if err := ctxErr("decide", ctx); err != nil {
			return Decision{}, true, events, err
		}
		now = c.now()
	}
	if d.Instance != nil && c.heldLocked(d.Instance.UUID, now) {
		return Decision{}, false, events, nil // lent meanwhile: evaluate again
	}
	if d.Outcome != Deny {
		var err error
		if d, err = c.grantLocked(ctx, req, key, d, now); err != nil {
			return d, true, events, err
		}
	}
	c.idem.remember(rk, fp, d, now)
	return d.clone(), true, events, nil
}

// Quote is Decide without effects: no lease, no idempotency record, no
// commit. Every sidecar answers quotes (scatter-gather), so a launcher can
// pick a GPU. It evaluates on a snapshot, without the lock, within ctx's
// deadline capped by Config.DecisionTimeout; an answer ready only after the
// deadline is ErrTimeout, as for Decide.
func (c *Controller) Quote(ctx context.Context, req Request) (Decision, error) {
	key, err := c.validate(&req)
	if err != nil {
		return Decision{}, err
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	s := c.snapshot()
	d, err := s.pol.decide(ctx, &req, key, &s.view)
	if err == nil {
		if err = ctxErr("quote", ctx); err != nil {
			return Decision{}, err
		}
	}
	return d, err
}

// unavailable returns a deny for an unhealthy component and the matching
// ErrUnavailable.
func unavailable(code ReasonCode, msg string) (Decision, error) {
	return Decision{Outcome: Deny, Code: code, Message: msg}, fmt.Errorf("%w: %s", ErrUnavailable, msg)
}

// grantLocked creates and stores the lease of a grant or throttle. The
// lease lives for its first term (Config.LeaseFirstTerm, or its own length
// when shorter) until a renew or register extends it to its duration, so
// that a grant nobody received (the launcher gave up waiting) frees its
// capacity soon. c.mu is held, and released while the record is created.
func (c *Controller) grantLocked(ctx context.Context, req *Request, key predictor.ProfileKey, d Decision, now time.Time) (Decision, error) {
	dur := c.leaseDuration(req.LeaseSeconds)
	l := Lease{
		ID: rand.Text(), TokenHash: req.TokenHash, JobID: req.JobID, Owner: req.Owner, Tenant: req.Tenant, RequestHash: requestKey(req.Tenant, req.RequestID),
		Priority: req.Priority, Weight: req.Weight, Checkpointable: req.Checkpointable, Pct: d.Pct, MinPct: req.MinPct, MaxPct: max(d.Pct, req.MaxPct), RunningPct: d.Pct,
		MemoryMiB: req.memoryMiB(), Processes: req.Processes, Profile: req.Profile, CreatedAt: now,
		ExpiresAt: now.Add(min(dur, c.cfg.Lease.FirstTerm)), Duration: dur, Instance: d.Instance,
	}
	// The lease holds its capacity while its record is created without
	// the lock (write.go), and leaves again if the store refuses it.
	e := &entry{liveLease: liveLease{lease: l, key: key}}
	c.leases[l.ID] = e
	c.byRequest[l.RequestHash] = l.ID
	c.changedLocked()
	if err := c.writeLocked(e, func() error { return c.deps.Store.Save(ctx, &l) }); err != nil {
		c.forget(&e.lease)
		if ctx.Err() != nil {
			return Decision{}, ctxErr("decide", ctx)
		}
		return unavailable(CodeStoreUnavailable, "storing the lease failed: "+err.Error())
	}
	e.lease = l
	if !c.now().Before(l.ExpiresAt) {
		// The store took longer than the lease's first term: the lease is
		// over before its launcher hears of it. The expiry loop, woken by
		// the write's end, deletes it.
		return unavailable(CodeStoreUnavailable, "storing the lease took longer than its first term (admission.lease.first_term); retry")
	}
	pub := l.public()
	d.Lease, d.Env = &pub, c.Env(pub)
	return d, nil
}

// leaseDuration is the requested length, the default for 0, clamped to max.
func (c *Controller) leaseDuration(secs int) time.Duration {
	if secs == 0 {
		return c.cfg.Lease.Default
	}
	if int64(secs) >= int64(c.cfg.Lease.Max/time.Second) {
		return c.cfg.Lease.Max
	}
	return time.Duration(secs) * time.Second
}

// liveAt reports whether e is live at now: not yet expired, or with its
// record being written. A renew in flight may have been due before its
// write ends (and a grant's write may outlast its first term): until the
// write is done, its capacity stays taken. c.mu is held.
func (e *entry) liveAt(now time.Time) bool { return e.writing || now.Before(e.lease.ExpiresAt) }

// countsLocked reports whether e's capacity is taken at now: while it is
// live, and after it ended for as long as it has processes to evict (the
// expiry loop evicts them, then forgets the lease). c.mu is held.
func (c *Controller) countsLocked(e *entry, now time.Time) bool {
	return e.liveAt(now) || c.deps.Evictor != nil && len(e.lease.PIDs)+len(e.lease.Retired) > 0
}

// liveLocked returns the leases that count at now (countsLocked), oldest first
// (the order in which they are trainers in a prediction).
func (c *Controller) liveLocked(now time.Time) []*entry {
	out := make([]*entry, 0, len(c.leases))
	for _, e := range c.leases {
		if c.countsLocked(e, now) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *entry) int {
		return cmp.Or(a.lease.CreatedAt.Compare(b.lease.CreatedAt), cmp.Compare(a.lease.ID, b.lease.ID))
	})
	return out
}

// colocatedLocked is liveLocked without the leases that hold a MIG
// instance whole: the trainers next to the services. c.mu is held.
func (c *Controller) colocatedLocked(now time.Time) []*entry {
	return slices.DeleteFunc(c.liveLocked(now), func(e *entry) bool { return e.lease.Instance != nil })
}

// signal wakes Run: a lease's expiry may now be earlier than its timer.
func (c *Controller) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// requestKey is what colocd keeps of a request_id: a SHA-256.
//
// The key is per identity: one identity's request_id is no other's, so
// that no launcher can make another's admit a conflict by sending its id
// first. A request without an identity keys by its id alone, as every
// lease stored before identities were kept does.
func requestKey(tenant, id string) [32]byte {
	if tenant == "" {
		return sha256.Sum256([]byte(id))
	}
	return sha256.Sum256([]byte(tenant + "\x00" + id))
}

// errStore wraps a store failure of a lease operation.
func errStore(op string, err error) error {
	if errors.Is(err, ErrConflict) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: lease store: %w", op, ErrUnavailable, err)
}
