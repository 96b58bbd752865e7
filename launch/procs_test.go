package launch

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/colocd/colocd/internal/proc"
	"github.com/google/go-cmp/cmp"
)

// A fake /proc: the command (10) with a launcher child (11) that started
// two workers (12, 13), one of which holds the GPU open; 14 left the tree
// (its parent died) but is still in the command's group; 20 is someone
// else's process with the GPU.
func TestTreeAndGPU(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mkproc := func(pid, ppid, pgid int, start int, gpu bool) {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
			t.Fatal(err)
		}
		line := strconv.Itoa(pid) + " (p y) S " + strconv.Itoa(ppid) + " " + strconv.Itoa(pgid) + " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 " + strconv.Itoa(start) + " 0\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Symlink("/dev/null", filepath.Join(dir, "fd", "0"))
		if gpu {
			os.Symlink("/dev/nvidia0", filepath.Join(dir, "fd", "7"))
		}
	}
	mkproc(1, 0, 1, 1, false)
	mkproc(10, 1, 10, 100, false)
	mkproc(11, 10, 10, 101, false)
	mkproc(13, 11, 10, 103, true)
	mkproc(12, 11, 10, 102, false)
	mkproc(14, 1, 10, 104, true)
	mkproc(20, 1, 20, 50, true)
	mkproc(15, 13, 10, 99, false) // a worker listed first: sorted by start time
	os.MkdirAll(filepath.Join(root, "self"), 0o755)
	pt := proc.Table{Root: root}
	all, err := pt.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, p := range tree(all, 10) {
		got = append(got, p.PID)
	}
	if diff := cmp.Diff([]int{15, 10, 11, 12, 13, 14}, got); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
	var gpu []int
	for _, pid := range got {
		if pt.HasOpen(pid, gpuDevices) {
			gpu = append(gpu, pid)
		}
	}
	if diff := cmp.Diff([]int{13, 14}, gpu); diff != "" {
		t.Errorf("GPU processes (-want +got):\n%s", diff)
	}
}

func TestParseAction(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want string
		err      bool
	}{
		{"restart", "restart", false},
		{"signal:SIGUSR1", "signal:SIGUSR1", false},
		{"signal:usr2", "signal:SIGUSR2", false},
		{"signal:10", "signal:SIGUSR1", false},
		{"signal:SIGKILL", "", true},
		{"signal:9", "", true},
		{"kill", "", true},
		{"signal:", "", true},
	} {
		a, err := ParseAction(tt.in)
		if (err != nil) != tt.err || (err == nil && a.String() != tt.want) {
			t.Errorf("ParseAction(%q) = %v, %v; want %q (error %v)", tt.in, a, err, tt.want, tt.err)
		}
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
