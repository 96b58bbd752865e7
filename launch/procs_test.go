package launch

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 0 0"
	tests := []struct {
		name string
		line string
		want procStat
		err  bool
	}{
		{"plain", "123 (python) S 100 123 123" + tail, procStat{PID: 123, PPID: 100, PGID: 123, Start: 0}, false},
		{"comm with spaces and parens", "77 (a) b (c)) R 1 70 70 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 99 0", procStat{PID: 77, PPID: 1, PGID: 70, Start: 99}, false},
		{"no comm", "123 python S 1 1 1", procStat{}, true},
		{"short", "123 (x) S 1 1", procStat{}, true},
		{"bad pid", "x (y) S 1 1 1" + tail, procStat{}, true},
		{"bad ppid", "1 (y) S -4 1 1" + tail, procStat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.line))
			if (err != nil) != tt.err {
				t.Fatalf("err %v, want error %v", err, tt.err)
			}
			if err != nil && !errors.Is(err, errStat) {
				t.Errorf("err %v is not errStat", err)
			}
			if err == nil && got.PID != tt.want.PID || got.PPID != tt.want.PPID || got.PGID != tt.want.PGID {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got, _ := parseStat([]byte("123 (python) S 100 123 123" + tail)); got.Start != 0 {
		// field 22 of that line is the 20th after the comm: 0 here.
		t.Errorf("start %d", got.Start)
	}
	if got, _ := parseStat([]byte("5 (x) S 1 5 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 0")); got.Start != 4242 {
		t.Errorf("start %d, want 4242", got.Start)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("123 (python) S 100 123 123 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 0"))
	f.Add([]byte("1 ((sd-pam)) S 0 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0"))
	f.Add([]byte(")("))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStat(b)
		if err == nil && (st.PID <= 0 || st.PPID < 0 || st.PGID < 0) {
			t.Errorf("accepted %q as %+v", b, st)
		}
	})
}

// A fake /proc: the command (10) with a launcher child (11) that started
// two workers (12, 13), one of which holds the GPU open; 14 left the tree
// (its parent died) but is still in the command's group; 20 is someone
// else's process with the GPU.
func TestTreeAndGPU(t *testing.T) {
	root := t.TempDir()
	proc := func(pid, ppid, pgid int, start int, gpu bool) {
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
	proc(1, 0, 1, 1, false)
	proc(10, 1, 10, 100, false)
	proc(11, 10, 10, 101, false)
	proc(13, 11, 10, 103, true)
	proc(12, 11, 10, 102, false)
	proc(14, 1, 10, 104, true)
	proc(20, 1, 20, 50, true)
	proc(15, 13, 10, 99, false) // a worker listed first: sorted by start time
	os.MkdirAll(filepath.Join(root, "self"), 0o755)
	pt := procTable{root: root}
	all, err := pt.all()
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
		if pt.opensGPU(pid) {
			gpu = append(gpu, pid)
		}
	}
	if diff := cmp.Diff([]int{13, 14}, gpu); diff != "" {
		t.Errorf("GPU processes (-want +got):\n%s", diff)
	}
}

func TestParseAction(t *testing.T) {
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
