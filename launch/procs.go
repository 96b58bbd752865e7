package launch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// procStat is what /proc/<pid>/stat says of a process that matters here.
type procStat struct {
	PID, PPID, PGID int
	// Start is the process's start time in clock ticks since boot: with
	// the PID it names one process, not a later one that reused the id.
	Start uint64
}

// errStat is a /proc/<pid>/stat line that does not parse.
var errStat = errors.New("malformed /proc stat line")

// parseStat parses a /proc/<pid>/stat line. The command name (field 2) is
// in parentheses and may hold spaces and parentheses itself, so the fields
// after it are counted from the last ')'.
func parseStat(line []byte) (procStat, error) {
	open := bytes.IndexByte(line, '(')
	end := bytes.LastIndexByte(line, ')')
	if open < 1 || end < open {
		return procStat{}, fmt.Errorf("%w: no (comm)", errStat)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line[:open])))
	if err != nil || pid <= 0 {
		return procStat{}, fmt.Errorf("%w: pid %q", errStat, clip(line[:open]))
	}
	// After ") ": state(3) ppid(4) pgrp(5) ... starttime(22).
	rest := strings.Fields(string(line[end+1:]))
	if len(rest) < 20 {
		return procStat{}, fmt.Errorf("%w: %d fields after comm, want at least 20", errStat, len(rest))
	}
	st := procStat{PID: pid}
	if st.PPID, err = strconv.Atoi(rest[1]); err != nil || st.PPID < 0 {
		return procStat{}, fmt.Errorf("%w: ppid %q", errStat, clip([]byte(rest[1])))
	}
	if st.PGID, err = strconv.Atoi(rest[2]); err != nil || st.PGID < 0 {
		return procStat{}, fmt.Errorf("%w: pgrp %q", errStat, clip([]byte(rest[2])))
	}
	if st.Start, err = strconv.ParseUint(rest[19], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("%w: starttime %q", errStat, clip([]byte(rest[19])))
	}
	return st, nil
}

func clip(b []byte) string {
	if len(b) > 32 {
		b = b[:32]
	}
	return string(b)
}

// procTable reads the processes under a /proc root.
type procTable struct {
	root string // "/proc"
}

// all reads every process's stat; processes that vanish meanwhile or whose
// line does not parse are skipped.
func (t procTable) all() ([]procStat, error) {
	ents, err := os.ReadDir(t.root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.root, err)
	}
	var out []procStat
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(t.root, e.Name(), "stat"))
		if err != nil {
			continue
		}
		if st, err := parseStat(b); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// tree returns the processes that belong to the command started as root
// (its PID is also its process group's id): root, its descendants, and any
// other member of its process group (a descendant whose parent exited is
// reparented, but keeps its group). Sorted by start time, then PID.
func tree(procs []procStat, root int) []procStat {
	children := map[int][]int{}
	byPID := map[int]procStat{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
		byPID[p.PID] = p
	}
	seen := map[int]bool{}
	var walk func(int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		if _, ok := byPID[pid]; !ok {
			return
		}
		seen[pid] = true
		for _, c := range children[pid] {
			walk(c)
		}
	}
	walk(root)
	for _, p := range procs {
		if p.PGID == root {
			walk(p.PID)
		}
	}
	var out []procStat
	for pid := range seen {
		out = append(out, byPID[pid])
	}
	slices.SortFunc(out, func(a, b procStat) int {
		if a.Start != b.Start {
			if a.Start < b.Start {
				return -1
			}
			return 1
		}
		return a.PID - b.PID
	})
	return out
}

// opensGPU reports whether pid holds an NVIDIA device file open
// (/dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, …): a process with a CUDA
// context does.
func (t procTable) opensGPU(pid int) bool {
	dir := filepath.Join(t.root, strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, "/dev/nvidia") {
			return true
		}
	}
	return false
}
