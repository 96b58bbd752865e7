package mps

import (
	"regexp"
	"strconv"
)

// The parameter types below are the only values that reach the control
// pipe. Each has a Validate method that every command calls before anything
// runs, and each is written to the pipe by strconv or, for a UUID, only after
// the UUID matched a strict pattern. No other string can reach the pipe.

// PID is a Linux process ID: an MPS server, an MPS client, or the daemon.
type PID int

// MaxPID is Linux's PID_MAX_LIMIT: no PID is larger.
const MaxPID PID = 1 << 22

// Validate reports whether p can be a process ID.
func (p PID) Validate() error {
	if p < 1 || p > MaxPID {
		return invalid("pid", "an integer in [1, 4194304]", int(p))
	}
	return nil
}

func (p PID) arg() string { return strconv.Itoa(int(p)) }

// ParsePID parses a decimal PID from outside text (a request, a file). Only
// digits are accepted: no sign, no space, no newline.
func ParsePID(s string) (PID, error) {
	n, ok := parseDigits(s, 7)
	if !ok || n < 1 || n > int64(MaxPID) {
		return 0, invalid("pid", "an integer in [1, 4194304]", s)
	}
	return PID(n), nil
}

// Percentage is an active-thread percentage, 1 to 100.
type Percentage int

// Validate reports whether p is in [1, 100].
func (p Percentage) Validate() error {
	if p < 1 || p > 100 {
		return invalid("active thread percentage", "an integer in [1, 100]", int(p))
	}
	return nil
}

func (p Percentage) arg() string { return strconv.Itoa(int(p)) }

// ParsePercentage parses a decimal percentage from outside text.
func ParsePercentage(s string) (Percentage, error) {
	n, ok := parseDigits(s, 3)
	if !ok || n < 1 || n > 100 {
		return 0, invalid("active thread percentage", "an integer in [1, 100]", s)
	}
	return Percentage(n), nil
}

// Priority is an MPS client priority: PriorityNormal or PriorityBelowNormal.
// It is a hint to the driver, not a guarantee.
type Priority int

// The two client priorities MPS accepts.
const (
	PriorityNormal      Priority = 0
	PriorityBelowNormal Priority = 1
)

// Validate reports whether p is 0 or 1.
func (p Priority) Validate() error {
	if p != PriorityNormal && p != PriorityBelowNormal {
		return invalid("client priority", "0 (normal) or 1 (below normal)", int(p))
	}
	return nil
}

func (p Priority) arg() string { return strconv.Itoa(int(p)) }

// UID is a Linux user ID, for start_server.
type UID int

// Validate reports whether u is a user ID (not the -1 "no user" value).
func (u UID) Validate() error {
	if u < 0 || u > 1<<32-2 {
		return invalid("uid", "an integer in [0, 4294967294]", int(u))
	}
	return nil
}

func (u UID) arg() string { return strconv.Itoa(int(u)) }

// UUID is a GPU UUID as NVML and nvidia-smi print it, e.g.
// GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab (MIG- for a MIG device).
type UUID string

var uuidPattern = regexp.MustCompile(`^(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Validate reports whether u has the exact UUID layout.
func (u UUID) Validate() error {
	if !uuidPattern.MatchString(string(u)) {
		return invalid("uuid", "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hex)", string(u))
	}
	return nil
}

func (u UUID) arg() string { return string(u) }

// ParseUUID validates outside text as a UUID.
func ParseUUID(s string) (UUID, error) {
	u := UUID(s)
	if err := u.Validate(); err != nil {
		return "", err
	}
	return u, nil
}

// MaxDeviceIndex bounds a device ordinal; no node has more GPUs.
const MaxDeviceIndex = 255

// Device names a GPU in a pinned-memory command: an ordinal as the daemon
// sees it (a daemon started with CUDA_VISIBLE_DEVICES=<uuid> sees its GPU as
// 0) or a UUID. The zero Device is ordinal 0.
type Device struct {
	index int
	uuid  UUID
}

// DeviceIndex names a device by ordinal.
func DeviceIndex(i int) Device { return Device{index: i} }

// DeviceUUID names a device by UUID.
func DeviceUUID(u UUID) Device { return Device{uuid: u} }

// Validate reports whether d is an ordinal in [0, 255] or a valid UUID.
func (d Device) Validate() error {
	if d.uuid != "" {
		return d.uuid.Validate()
	}
	if d.index < 0 || d.index > MaxDeviceIndex {
		return invalid("device", "an ordinal in [0, 255] or a GPU UUID", d.index)
	}
	return nil
}

// String returns the device as the control pipe gets it.
func (d Device) String() string { return d.arg() }

func (d Device) arg() string {
	if d.uuid != "" {
		return string(d.uuid)
	}
	return strconv.Itoa(d.index)
}

// MemLimit is a pinned device memory limit in bytes. The control pipe gets
// it in whole MiB ("<n>M"), so a limit to set must be a positive multiple of
// MiB. Zero, as read back, means no limit.
type MemLimit uint64

// Units for MemLimit.
const (
	MiB MemLimit = 1 << 20
	GiB MemLimit = 1 << 30
)

// MaxMemLimit bounds a limit to set (1 PiB): far beyond any GPU.
const MaxMemLimit MemLimit = 1 << 50

// Validate reports whether m can be set: > 0, a multiple of MiB, ≤ 1 PiB.
func (m MemLimit) Validate() error {
	if m == 0 || m%MiB != 0 || m > MaxMemLimit {
		return invalid("pinned memory limit", "a positive multiple of 1 MiB, at most 1 PiB", uint64(m))
	}
	return nil
}

// MiBs returns the limit in whole MiB.
func (m MemLimit) MiBs() uint64 { return uint64(m / MiB) }

func (m MemLimit) arg() string { return strconv.FormatUint(m.MiBs(), 10) + "M" }

// parseDigits parses s as a decimal of at most maxLen ASCII digits.
func parseDigits(s string, maxLen int) (int64, bool) {
	if len(s) == 0 || len(s) > maxLen {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
