package launch

import (
	"cmp"
	"slices"

	"github.com/colocd/colocd/internal/proc"
)

// gpuDevices is the prefix of the device files a process with a CUDA
// context holds open (/dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, …).
const gpuDevices = "/dev/nvidia"

// tree returns the processes that belong to the command started as root
// (its PID is also its process group's id): root, its descendants, and any
// other member of its process group (a descendant whose parent exited is
// reparented, but keeps its group). Sorted by start, then PID.
func tree(procs []proc.Stat, root int) []proc.Stat {
	children := map[int][]int{}
	byPID := map[int]proc.Stat{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
		byPID[p.PID] = p
	}
	seen := map[int]bool{}
	var walk func(int)
	walk = func(pid int) {
		if _, ok := byPID[pid]; !ok || seen[pid] {
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
	out := make([]proc.Stat, 0, len(seen))
	for pid := range seen {
		out = append(out, byPID[pid])
	}
	slices.SortFunc(out, func(a, b proc.Stat) int {
		return cmp.Or(cmp.Compare(a.StartTicks, b.StartTicks), cmp.Compare(a.PID, b.PID))
	})
	return out
}
