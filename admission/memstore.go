package admission

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// MemStore is an in-memory Store with the KV store's semantics
// (compare-and-swap on revision), for tests and for running without NATS.
// It keeps copies, so callers cannot change stored leases behind its back.
type MemStore struct {
	mu     sync.Mutex
	rev    uint64
	leases map[string]Lease
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{leases: map[string]Lease{}} }

var _ Store = (*MemStore)(nil)

// Save creates l (Revision 0; an existing id conflicts) or replaces it if
// l.Revision is the stored one, and sets l.Revision.
func (s *MemStore) Save(_ context.Context, l *Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.leases[l.ID]
	switch {
	case l.Revision == 0 && ok:
		return fmt.Errorf("save lease %s: exists: %w", l.ID, ErrConflict)
	case l.Revision != 0 && !ok:
		return fmt.Errorf("save lease %s: %w", l.ID, ErrNotFound)
	case l.Revision != 0 && old.Revision != l.Revision:
		return fmt.Errorf("save lease %s: revision %d, stored %d: %w", l.ID, l.Revision, old.Revision, ErrConflict)
	}
	s.rev++
	l.Revision = s.rev
	s.leases[l.ID] = l.clone()
	return nil
}

// Delete removes l if its revision is the stored one.
func (s *MemStore) Delete(_ context.Context, l *Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.leases[l.ID]
	if !ok {
		return fmt.Errorf("delete lease %s: %w", l.ID, ErrNotFound)
	}
	if old.Revision != l.Revision {
		return fmt.Errorf("delete lease %s: revision %d, stored %d: %w", l.ID, l.Revision, old.Revision, ErrConflict)
	}
	delete(s.leases, l.ID)
	return nil
}

// Load returns copies of every stored lease, by id.
func (s *MemStore) Load(context.Context) ([]*Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Lease, 0, len(s.leases))
	for _, l := range s.leases {
		c := l.clone()
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *Lease) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
