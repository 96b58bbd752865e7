package admission

import (
	"fmt"
	"time"

	"github.com/colocd/colocd/predictor"
)

// StoredLease is a lease as the KV bucket holds it: the token and the
// request_id only as their hashes, and the training profile (needed again
// after a restart) inline when it is small, else by its reference in the
// profile store (ProfileRef, set by the store), so that a record stays far
// below NATS's message limit. It lives beside Lease so that a field added to
// one and not the other fails TestStoredLeaseRoundTrip.
type StoredLease struct {
	ID             string             `json:"id"`
	TokenHash      []byte             `json:"token_sha256"`
	JobID          string             `json:"job_id"`
	Owner          string             `json:"owner"`
	Tenant         string             `json:"tenant,omitempty"`
	RequestHash    []byte             `json:"request_sha256"`
	Priority       int                `json:"priority"`
	Weight         float64            `json:"weight,omitempty"`
	Checkpointable bool               `json:"checkpointable"`
	Pct            int                `json:"pct"`
	MinPct         int                `json:"min_pct"`
	MaxPct         int                `json:"max_pct,omitempty"`
	RunningPct     int                `json:"running_pct,omitempty"`
	MemoryMiB      int                `json:"memory_mib"`
	Processes      int                `json:"processes"`
	Profile        *predictor.Profile `json:"profile,omitempty"`
	ProfileRef     string             `json:"profile_ref,omitempty"`
	PIDs           []int              `json:"pids,omitempty"`
	Starts         []time.Time        `json:"pid_starts,omitempty"`
	StartIDs       []uint64           `json:"pid_start_ids,omitempty"`
	Released       bool               `json:"released,omitempty"`
	RegisteredAt   time.Time          `json:"registered_at,omitzero"`
	ThrottledAt    time.Time          `json:"throttled_at,omitzero"`
	Retired        []storedProcess    `json:"retired,omitempty"`
	CreatedAt      time.Time          `json:"created_at"`
	ExpiresAt      time.Time          `json:"expires_at"`
	Duration       time.Duration      `json:"duration_ns"`
	Deadline       time.Time          `json:"deadline,omitzero"`
	Revoked        bool               `json:"revoked,omitempty"`
	Instance       *storedInstance    `json:"instance,omitempty"`
}

// storedInstance is the MIG instance a lease holds whole.
type storedInstance struct {
	UUID      string `json:"uuid"`
	Profile   string `json:"profile"`
	SMs       int    `json:"sms"`
	MemoryMiB int    `json:"memory_mib"`
}

// storedProcess is a replaced process still to evict.
type storedProcess struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started,omitzero"`
	StartID uint64    `json:"start_id,omitempty"`
	Due     time.Time `json:"due,omitzero"`
}

// NewStoredLease is l as the store keeps it.
func NewStoredLease(l *Lease) StoredLease {
	var retired []storedProcess
	for _, p := range l.Retired {
		retired = append(retired, storedProcess(p))
	}
	var inst *storedInstance
	if g := l.Instance; g != nil {
		inst = &storedInstance{UUID: g.UUID, Profile: g.Profile, SMs: g.SMs, MemoryMiB: g.MemoryMiB}
	}
	return StoredLease{Instance: inst, StartIDs: l.StartIDs, Released: l.Released, MaxPct: l.MaxPct, RunningPct: l.RunningPct, Starts: l.Starts, RegisteredAt: l.RegisteredAt, ThrottledAt: l.ThrottledAt, Retired: retired,
		ID: l.ID, TokenHash: l.TokenHash[:], JobID: l.JobID, Owner: l.Owner, Tenant: l.Tenant, RequestHash: l.RequestHash[:],
		Priority: l.Priority, Weight: l.Weight, Checkpointable: l.Checkpointable, Pct: l.Pct, MinPct: l.MinPct, MemoryMiB: l.MemoryMiB,
		Processes: l.Processes, Profile: l.Profile, PIDs: l.PIDs, CreatedAt: l.CreatedAt, ExpiresAt: l.ExpiresAt,
		Duration: l.Duration, Deadline: l.Deadline, Revoked: l.Revoked}
}

// Lease is the lease s keeps, at the store's revision rev. The error names
// the field that cannot be read back.
func (s StoredLease) Lease(rev uint64) (*Lease, error) {
	if len(s.TokenHash) != 32 {
		return nil, fmt.Errorf("lease %s: token_sha256: want 32 bytes, got %d", s.ID, len(s.TokenHash))
	}
	l := &Lease{ID: s.ID, JobID: s.JobID, Owner: s.Owner, Tenant: s.Tenant, Priority: s.Priority, Weight: s.Weight,
		Checkpointable: s.Checkpointable, Pct: s.Pct, MinPct: s.MinPct, MemoryMiB: s.MemoryMiB, Processes: s.Processes,
		Profile: s.Profile, PIDs: s.PIDs, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt, Duration: s.Duration,
		Deadline: s.Deadline, Revoked: s.Revoked, Revision: rev,
		Starts: s.Starts, RegisteredAt: s.RegisteredAt, ThrottledAt: s.ThrottledAt, MaxPct: s.MaxPct, RunningPct: s.RunningPct,
		StartIDs: s.StartIDs, Released: s.Released}
	for _, p := range s.Retired {
		l.Retired = append(l.Retired, Process(p))
	}
	if g := s.Instance; g != nil { // checked by admission's Restore
		l.Instance = &InstanceGrant{UUID: g.UUID, Profile: g.Profile, SMs: g.SMs, MemoryMiB: g.MemoryMiB}
	}
	copy(l.TokenHash[:], s.TokenHash)
	copy(l.RequestHash[:], s.RequestHash) // absent or short: no idempotency record to keep
	return l, nil
}
