package admission

import (
	"fmt"
	"time"

	"github.com/colocd/colocd/internal/digest"
	"github.com/colocd/colocd/predictor"
)

// idempotency remembers recent decisions by request_id, for IdempotencyTTL
// and at most IdempotencyMax of them (oldest forgotten first). Only Decide
// records; errors (invalid, unavailable) are not decisions and are not
// remembered, so a retry after a 503 is decided afresh.
type idempotency struct {
	ttl   time.Duration
	max   int
	byID  map[[32]byte]*idemEntry // by requestKey: no request_id is kept
	order [][32]byte              // oldest first, from head on
	head  int                     // order[:head] are forgotten
}

type idemEntry struct {
	fp  [32]byte // the request's content
	d   Decision
	exp time.Time
}

// lookup returns the remembered decision for id, or ErrRequestIDReused when
// the id was used for a different request.
func (m *idempotency) lookup(id [32]byte, fp [32]byte, now time.Time) (Decision, bool, error) {
	m.prune(now)
	e, ok := m.byID[id]
	if !ok {
		return Decision{}, false, nil
	}
	if e.fp != fp {
		return Decision{}, false, fmt.Errorf("decide: %w", ErrRequestIDReused)
	}
	return e.d.clone(), true, nil
}

func (m *idempotency) remember(id [32]byte, fp [32]byte, d Decision, now time.Time) {
	m.byID[id] = &idemEntry{fp: fp, d: d.clone(), exp: now.Add(m.ttl)}
	m.order = append(m.order, id)
	m.prune(now)
}

// prune forgets expired entries and the oldest beyond max. The forgotten
// front of order is dropped once it is half of it, so that a full cache
// forgets one entry per decision in constant time, not by moving max ids.
func (m *idempotency) prune(now time.Time) {
	for m.head < len(m.order) {
		id := m.order[m.head]
		e := m.byID[id]
		if e != nil && len(m.byID) <= m.max && now.Before(e.exp) {
			break
		}
		delete(m.byID, id)
		m.head++
	}
	if m.head > 0 && m.head >= len(m.order)/2 {
		m.order = append(m.order[:0], m.order[m.head:]...)
		m.head = 0
	}
}

// fingerprint hashes everything in the request but its id; key is the
// profile's content hash.
func (r *Request) fingerprint(key predictor.ProfileKey) [32]byte {
	var h digest.Hasher
	h.String(r.JobID)
	h.String(r.Owner)
	h.Int(r.Priority)
	h.Float64(r.Weight)
	h.Key(key)
	h.Key(r.TokenHash) // a replay with another token is another request
	for _, v := range []int{r.MemoryMiB, r.Processes, r.MinPct, r.MaxPct, r.LeaseSeconds} {
		h.Int(v)
	}
	h.Bool(r.Checkpointable)
	return h.Sum()
}
