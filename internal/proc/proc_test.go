package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/fieldtest"
)

func TestParseStartTicks(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		stat    string
		want    uint64
		wantErr string // "": ParseStartTicks succeeds
	}{
		"cat":                                {stat: "27226 (cat) R 27223 27223 26517 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 1536637 3133440 388 18446744073709551615", want: 1536637},
		"a name with spaces and parentheses": {stat: "7 (a) b) c) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0", want: 42},
		"no name":                            {stat: "7 S 1 7", wantErr: "no command name"},
		"short":                              {stat: "7 (x) S 1 7 7", wantErr: "at least 22 fields"},
		"not a number":                       {stat: "7 (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 0 0", wantErr: "starttime"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseStartTicks(tc.stat)
			if tc.wantErr != "" {
				fieldtest.WantText(t, err, tc.wantErr)
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseStartTicks(%q) = %d, %v; want %d", tc.stat, got, err, tc.want)
			}
		})
	}
}

func TestStartTimeOfFakeTable(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "stat"), []byte("cpu  1 2 3\nbtime 1000\nprocesses 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "12"), 0o755); err != nil {
		t.Fatal(err)
	}
	line := "12 (train) S 1 12 12 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 250 0 0\n"
	if err := os.WriteFile(filepath.Join(root, "12", "stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "12", "environ"), []byte("PATH=/bin\x00COLOCD_LEASE_ID=abc\x00X=COLOCD_LEASE_ID=no\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	tab := Table{Root: root}
	got, id, err := tab.StartTime(12)
	if want := time.Unix(1002, 500_000_000); err != nil || !got.Equal(want) || id != 250 {
		t.Fatalf("StartTime(12) = %v, %d, %v; want %v, 250", got, id, err, want)
	}
	if v, ok, err := tab.Getenv(12, "COLOCD_LEASE_ID"); err != nil || !ok || v != "abc" {
		t.Errorf("Getenv = %q, %v, %v; want abc", v, ok, err)
	}
	if v, ok, err := tab.Getenv(12, "HOME"); err != nil || ok || v != "" {
		t.Errorf("Getenv of an unset variable = %q, %v, %v", v, ok, err)
	}
	// The boot time moves when the clock is stepped; the identity does not.
	if err := os.WriteFile(filepath.Join(root, "stat"), []byte("btime 1001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, id2, err := tab.StartTime(12); err != nil || id2 != id {
		t.Errorf("identity after a clock step %d, %v; want %d", id2, err, id)
	}
	if _, _, err := tab.StartTime(13); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("StartTime(13) err = %v, want ErrNoProcess", err)
	}
}

// TestStartTimeOfRealProcess checks a child started now reads as started
// now (within /proc's one-second precision), and differently from this
// process, which started earlier.
func TestStartTimeOfRealProcess(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	before := time.Now()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	got, id, err := Table{}.StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := (Table{}).Getenv(os.Getpid(), "PATH"); err != nil || !ok || v != os.Getenv("PATH") {
		t.Errorf("Getenv(self, PATH) = %q, %v, %v", v, ok, err)
	}
	if got.Before(before.Add(-2*time.Second)) || got.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("child started at %v, want about %v", got, before)
	}
	again, id2, err := Table{}.StartTime(cmd.Process.Pid)
	if err != nil || !again.Equal(got) || id2 != id {
		t.Fatalf("second read %v, %d, %v; want the same %v, %d", again, id2, err, got, id)
	}
}

func FuzzParseStartTicks(f *testing.F) {
	f.Add("27226 (cat) R 27223 27223 26517 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 1536637 3133440 388")
	f.Add("1 ()) ) S")
	f.Fuzz(func(t *testing.T, stat string) {
		ticks, err := ParseStartTicks(stat)
		if err == nil && ticks > maxTicks { // and so converts to a duration without overflow
			t.Fatalf("ticks %d above the bound", ticks)
		}
	})
}

func FuzzParseBootTime(f *testing.F) {
	f.Add("cpu 1\nbtime 1796153004\n")
	f.Add("btime -1")
	f.Fuzz(func(t *testing.T, stat string) {
		bt, err := ParseBootTime(stat)
		if err == nil && (bt.Unix() < 0 || bt.Unix() > 1<<40) {
			t.Fatalf("boot time %v out of bounds", bt)
		}
	})
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 0"
	tests := []struct {
		name string
		line string
		want Stat
		err  bool
	}{
		{"plain", "123 (python) S 100 123" + tail, Stat{PID: 123, PPID: 100, PGID: 123, StartTicks: 4242}, false},
		{"comm with spaces and parens", "77 (a) b (c)) R 1 70" + tail, Stat{PID: 77, PPID: 1, PGID: 70, StartTicks: 4242}, false},
		{"no comm", "123 python S 1 1 1" + tail, Stat{}, true},
		{"short", "123 (x) S 1 1", Stat{}, true},
		{"bad pid", "x (y) S 1 1" + tail, Stat{}, true},
		{"bad ppid", "1 (y) S -4 1" + tail, Stat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat(tt.line)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("ParseStat = %+v, %v; want %+v (error %v)", got, err, tt.want, tt.err)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add("123 (python) S 100 123 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 0")
	f.Add("1 ((sd-pam)) S 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0")
	f.Add(")(")
	f.Fuzz(func(t *testing.T, line string) {
		st, err := ParseStat(line)
		if err == nil && (st.PID < 1 || st.PPID < 0 || st.PGID < 0) {
			t.Errorf("accepted %q as %+v", line, st)
		}
	})
}

func TestParseStatusUID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, status string
		want         int
		err          string // "" when it parses
	}{
		{name: "root", status: "Name:\tvllm\nUmask:\t0022\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n", want: 0},
		{name: "user", status: "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n", want: 1000},
		{name: "real, not effective", status: "Uid:\t1000\t0\t0\t0\n", want: 1000},
		{name: "largest", status: "Uid:\t4294967294\t1\t1\t1\n", want: 4294967294},
		{name: "no user", status: "Uid:\t4294967295\t1\t1\t1\n", err: `status: Uid: want a user id in [0, 4294967294], got "4294967295"`},
		{name: "not a number", status: "Uid:\troot\n", err: `status: Uid: want a user id in [0, 4294967294], got "root"`},
		{name: "empty line", status: "Uid:\n", err: "status: Uid: want four user ids, got none"},
		{name: "no line", status: "Name:\tx\nGid:\t0\t0\t0\t0\n", err: "status: want a Uid: line, found none"},
		{name: "indented is not the line", status: " Uid:\t5\n", err: "status: want a Uid: line, found none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStatusUID(tc.status)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("ParseStatusUID = %d, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseStatusUID = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestUIDOfTableAndRealProcess(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "7", "status"), []byte("Name:\tvllm\nUid:\t0\t0\t0\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if uid, err := (Table{Root: root}).UID(7); err != nil || uid != 0 {
		t.Fatalf("UID(7) = %d, %v; want 0", uid, err)
	}
	if _, err := (Table{Root: root}).UID(8); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("UID(8) err = %v, want ErrNoProcess", err)
	}
	if uid, err := (Table{}).UID(os.Getpid()); err != nil || uid != os.Getuid() {
		t.Fatalf("UID of this process = %d, %v; want %d", uid, err, os.Getuid())
	}
}

func FuzzParseStatusUID(f *testing.F) {
	f.Add("Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n")
	f.Add("Uid:\t-1\n")
	f.Add("Uid:")
	f.Fuzz(func(t *testing.T, status string) {
		uid, err := ParseStatusUID(status)
		if err == nil && (uid < 0 || uid > maxUID) {
			t.Fatalf("uid %d out of [0, %d]", uid, maxUID)
		}
	})
}

// Running: this process runs; a child that exited is a zombie until it is
// waited for, and then gone: neither runs.
func TestRunning(t *testing.T) {
	t.Parallel()
	if !(Table{}).Running(os.Getpid()) {
		t.Error("this process does not run")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	zombie := func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err == nil && strings.Contains(string(stat), ") Z ")
	}
	for deadline := time.Now().Add(30 * time.Second); !zombie() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if !zombie() {
		t.Fatal("the child never became a zombie")
	}
	if (Table{}).Running(pid) {
		t.Errorf("an exited child (a zombie) runs")
	}
	_ = cmd.Wait()
	if (Table{}).Running(pid) {
		t.Errorf("a child waited for runs")
	}
}
