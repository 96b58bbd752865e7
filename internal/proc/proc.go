// Package proc reads when a host process started, from Linux's /proc, so
// that a process can be told from a later one that reuses its PID.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of /proc's times: USER_HZ, which Linux fixes at 100
// ticks a second for user space whatever the kernel's own tick rate.
const userHZ = 100

// ErrNoProcess is returned for a PID with no running process.
var ErrNoProcess = errors.New("no such process")

// Table reads processes from a proc file system (Root "" is /proc).
type Table struct {
	Root string
}

func (t Table) root() string {
	if t.Root == "" {
		return "/proc"
	}
	return t.Root
}

// StartTime returns when process pid started, and its start in clock ticks
// after boot: the process's identity, which no later process with the same
// PID shares and which, unlike the time, a step of the wall clock does not
// move. The time's precision is a second (the boot time /proc gives is
// whole seconds, and it moves when the clock is stepped).
func (t Table) StartTime(pid int) (time.Time, uint64, error) {
	stat, err := t.read(pid, "stat", 4096)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("start time of process %d: %w", pid, err)
	}
	ticks, err := ParseStartTicks(string(stat))
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("start time of process %d: %w", pid, err)
	}
	sys, err := os.ReadFile(filepath.Join(t.root(), "stat"))
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("start time of process %d: boot time: %w", pid, err)
	}
	boot, err := ParseBootTime(string(sys))
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("start time of process %d: %w", pid, err)
	}
	return boot.Add(time.Duration(ticks) * (time.Second / userHZ)), ticks, nil
}

// maxEnviron bounds what is read of a process's environment.
const maxEnviron = 1 << 20

// Getenv returns the value of variable name in process pid's environment
// as it started ("" and false when unset). Reading another user's
// process needs the rights a ptrace would (root, or CAP_SYS_PTRACE).
func (t Table) Getenv(pid int, name string) (string, bool, error) {
	env, err := t.read(pid, "environ", maxEnviron)
	if err != nil {
		return "", false, fmt.Errorf("environment of process %d: %w", pid, err)
	}
	v, ok := Lookup(env, name)
	return v, ok, nil
}

// Lookup finds name in a NUL-separated environment block.
func Lookup(environ []byte, name string) (string, bool) {
	prefix := name + "="
	for kv := range strings.SplitSeq(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, prefix); ok {
			return v, true
		}
	}
	return "", false
}

// read reads a file of process pid, at most limit bytes; a process that is
// gone (or exits meanwhile: ESRCH) is ErrNoProcess.
func (t Table) read(pid int, file string, limit int64) ([]byte, error) {
	if pid < 1 {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	f, err := os.Open(filepath.Join(t.root(), strconv.Itoa(pid), file))
	if err == nil {
		var data []byte
		data, err = io.ReadAll(io.LimitReader(f, limit))
		f.Close()
		if err == nil {
			return data, nil
		}
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	return nil, err
}

// Running reports whether pid is a process that has not exited: its stat
// reads, and its state is not Z (a zombie has exited; only its parent's
// wait is left).
func (t Table) Running(pid int) bool {
	stat, err := t.read(pid, "stat", 4096)
	if err != nil {
		return false
	}
	end := bytes.LastIndexByte(stat, ')')
	return end < 0 || end+2 >= len(stat) || stat[end+2] != 'Z'
}

// maxTicks bounds a start time in ticks, so that the conversion to a
// duration cannot overflow (about 292 years at USER_HZ).
const maxTicks uint64 = math.MaxInt64 / uint64(time.Second/userHZ)

// ParseStartTicks returns the starttime field (the 22nd) of a
// /proc/<pid>/stat line: clock ticks after boot. The command name (the
// 2nd field) is in parentheses and may itself hold spaces and ')', so the
// fields are counted from its last ')'.
func ParseStartTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || !strings.Contains(stat[:i], "(") {
		return 0, errors.New("stat: want \"pid (comm) state ...\", no command name in parentheses")
	}
	// After the command name: field 3 (state) onwards; starttime is the 20th of those.
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("stat: want at least 22 fields, got %d", len(fields)+2)
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil || ticks > maxTicks {
		return 0, fmt.Errorf("stat: starttime: want clock ticks in [0, %d], got %q", maxTicks, truncate(fields[19]))
	}
	return ticks, nil
}

// Stat is where a /proc/<pid>/stat line puts a process: its id, its
// parent's, its process group's, and its start in clock ticks after boot
// (with the id, the process's identity).
type Stat struct {
	PID, PPID, PGID int
	StartTicks      uint64
}

// ParseStat parses a /proc/<pid>/stat line (see ParseStartTicks for the
// command name's parentheses).
func ParseStat(stat string) (Stat, error) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 1 || end < open {
		return Stat{}, errors.New("stat: want \"pid (comm) state ...\", no command name in parentheses")
	}
	var st Stat
	var err error
	if st.PID, err = strconv.Atoi(strings.TrimSpace(stat[:open])); err != nil || st.PID < 1 {
		return Stat{}, fmt.Errorf("stat: pid: want a process id, got %q", truncate(stat[:open]))
	}
	if st.StartTicks, err = ParseStartTicks(stat); err != nil {
		return Stat{}, err
	}
	fields := strings.Fields(stat[end+1:]) // state, ppid, pgrp, ...: at least 20, as ParseStartTicks found
	if st.PPID, err = strconv.Atoi(fields[1]); err != nil || st.PPID < 0 {
		return Stat{}, fmt.Errorf("stat: ppid: want a process id, got %q", truncate(fields[1]))
	}
	if st.PGID, err = strconv.Atoi(fields[2]); err != nil || st.PGID < 0 {
		return Stat{}, fmt.Errorf("stat: pgrp: want a process group id, got %q", truncate(fields[2]))
	}
	return st, nil
}

// List returns every process of the table; those that exit meanwhile, or
// whose stat line does not parse, are left out.
func (t Table) List() ([]Stat, error) {
	ents, err := os.ReadDir(t.root())
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Stat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		line, err := t.read(pid, "stat", 4096)
		if err != nil {
			continue
		}
		if st, err := ParseStat(string(line)); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// HasOpen reports whether process pid holds open a file whose path
// starts with prefix (e.g. "/dev/nvidia": a process with a CUDA context).
func (t Table) HasOpen(pid int, prefix string) bool {
	dir := filepath.Join(t.root(), strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, prefix) {
			return true
		}
	}
	return false
}

// ParseBootTime returns the boot time from /proc/stat's "btime" line.
func ParseBootTime(stat string) (time.Time, error) {
	for line := range strings.SplitSeq(stat, "\n") {
		rest, ok := strings.CutPrefix(line, "btime ")
		if !ok {
			continue
		}
		secs, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		if err != nil || secs < 0 || secs > 1<<40 {
			return time.Time{}, fmt.Errorf("/proc/stat: btime: want seconds since 1970, got %q", truncate(rest))
		}
		return time.Unix(secs, 0), nil
	}
	return time.Time{}, errors.New("/proc/stat: no btime line")
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// maxUID is the largest Linux user ID ((uid_t)-1 is "no user").
const maxUID = 1<<32 - 2

// UID returns the real user ID of process pid (the first field of the
// Uid: line of /proc/<pid>/status): the user an MPS control daemon serves
// the process as.
func (t Table) UID(pid int) (int, error) {
	status, err := t.read(pid, "status", 64<<10)
	if err != nil {
		return 0, fmt.Errorf("user of process %d: %w", pid, err)
	}
	uid, err := ParseStatusUID(string(status))
	if err != nil {
		return 0, fmt.Errorf("user of process %d: %w", pid, err)
	}
	return uid, nil
}

// ParseStatusUID reads the real user ID from the text of a
// /proc/<pid>/status file: the first of the four numbers on its Uid: line
// (real, effective, saved, file system).
func ParseStatusUID(status string) (int, error) {
	for line := range strings.SplitSeq(status, "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, errors.New("status: Uid: want four user ids, got none")
		}
		uid, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || uid > maxUID {
			return 0, fmt.Errorf("status: Uid: want a user id in [0, %d], got %q", maxUID, truncate(f[0]))
		}
		return int(uid), nil
	}
	return 0, errors.New("status: want a Uid: line, found none")
}
