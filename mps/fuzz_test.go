package mps

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The parsers read a program's output: outside input. Each must never
// panic, and whatever it accepts must be valid and survive a round trip.

// fuzzRoundTrip fuzzes parse from seeds. It may refuse an answer only with
// an *OutputError; what it accepts, write checks and writes back as an
// answer, which must parse to the same.
func fuzzRoundTrip[T any](f *testing.F, parse func(string) (T, error), write func(*testing.T, T) string, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		v, err := parse(out)
		if err != nil {
			var oe *OutputError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v is not an *OutputError", err)
			}
			return
		}
		again, err := parse(write(t, v))
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if diff := cmp.Diff(v, again); diff != "" {
			t.Fatalf("round trip (-parsed +reparsed):\n%s", diff)
		}
	})
}

func FuzzParsePS(f *testing.F) {
	fuzzRoundTrip(f, parsePS, func(t *testing.T, rows []Client) string {
		var b strings.Builder
		b.WriteString("PID ID SERVER DEVICE NAMESPACE COMMAND\n")
		for _, r := range rows {
			if r.PID.Validate() != nil || r.Server.Validate() != nil || !psDevice.MatchString(r.Device) || r.ID < 0 {
				t.Fatalf("accepted an invalid row %+v", r)
			}
			if strings.ContainsAny(r.Command, "\n") {
				t.Fatalf("command %q spans lines", r.Command)
			}
			fmt.Fprintf(&b, "%d %d %d %s %d %s\n", r.PID, r.ID, r.Server, r.Device, r.Namespace, r.Command)
		}
		return b.String()
	},
		"PID ID SERVER DEVICE NAMESPACE COMMAND\n7301 0 6120 GPU-4f0e9a21-3c7b-5d18 4026531836 ./nbody\n",
		"PID ID SERVER DEVICE NAMESPACE COMMAND\n",
		"PID ID SERVER DEVICE NAMESPACE COMMAND\r\n1 2 3 MIG-ab 4\t  python  x.py \r\n",
		"garbage")
}

func fuzzPIDLines(f *testing.F, parse func(string) ([]PID, error)) {
	fuzzRoundTrip(f, parse, func(t *testing.T, pids []PID) string {
		var b strings.Builder
		for _, p := range pids {
			if p.Validate() != nil {
				t.Fatalf("accepted invalid PID %d", p)
			}
			fmt.Fprintf(&b, "%d\n", p)
		}
		return b.String()
	}, "1234\n5678\n", "", "1\r\n\r\n4194304", "4194305")
}

func FuzzParseServerList(f *testing.F) { fuzzPIDLines(f, parseServerList) }

func FuzzParseClientList(f *testing.F) { fuzzPIDLines(f, parseClientList) }

// fuzzAccepts fuzzes parse from seeds: whatever it accepts, ok must hold
// for.
func fuzzAccepts[T any](f *testing.F, parse func(string) (T, error), ok func(T) bool, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		v, err := parse(out)
		if err == nil && !ok(v) {
			t.Fatalf("accepted %v from %q", v, out)
		}
	})
}

func FuzzParseServerStatus(f *testing.F) {
	fuzzAccepts(f, parseServerStatus, func(s ServerState) bool { return s == ServerActive || s == ServerFault || s == ServerInitializing },
		"ACTIVE\n", "FAULT", "INITIALIZING", "Server 1 not found", "")
}

func FuzzParsePercentage(f *testing.F) {
	parse := func(out string) (float64, error) { return parsePercentage(verbGetActiveThreads, out) }
	fuzzAccepts(f, parse, func(v float64) bool { return v > 0 && v <= 100 }, "100.0\n", "33", "0", "1e2", "100.000001")
}

func FuzzParseMemLimit(f *testing.F) {
	parse := func(out string) (MemLimit, error) { return parseMemLimit(verbGetPinnedMemLimit, out) }
	fuzzAccepts(f, parse, func(v MemLimit) bool { return v <= MaxMemLimit },
		"0", "10G", "900M", "8192 MB", "1.5GiB", "0x140000000", "10240", "99999999999T")
}

func FuzzParsePriority(f *testing.F) {
	fuzzAccepts(f, parsePriority, func(p Priority) bool { return p.Validate() == nil }, "0", "1\n", "1 [BELOW NORMAL]", "0 [NORMAL]", "2")
}

func FuzzParseTerminate(f *testing.F) {
	for _, s := range []string{"0\n", "999", "Client not found", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		err := parseTerminate(out)
		if err != nil && !errors.Is(err, ErrTerminateFailed) && !errors.Is(err, ErrUnexpectedOutput) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		if err == nil && strings.TrimSpace(out) != "0" && strings.Trim(strings.TrimSpace(out), "0") != "" {
			t.Fatalf("accepted %q as success", out)
		}
	})
}

func FuzzParsePIDFile(f *testing.F) {
	fuzzAccepts(f, parsePIDFile, func(p PID) bool { return p.Validate() == nil }, "1234\n", "", "abc", "0", "-1")
}

// FuzzLogTail appends two chunks to a log and checks that the tail returns
// exactly the complete lines, whatever bytes they hold.
func FuzzLogTail(f *testing.F) {
	f.Add("[2026-02-06 09:34:17.770 Control   261] Starting\n", "Server 95 exited with status 1\npartial")
	f.Add("", "\n\n")
	f.Add("no newline", " still none")
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a)+len(b) > maxTailRead {
			return
		}
		path := filepath.Join(t.TempDir(), "control.log")
		tail := &logTail{path: path}
		tail.skipToEnd()
		write := func(s string) {
			fh, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			fh.WriteString(s)
			fh.Close()
		}
		write(a)
		got := tail.newLines()
		write(b)
		got = append(got, tail.newLines()...)
		all := a + b
		var want []string
		if i := strings.LastIndexByte(all, '\n'); i >= 0 {
			want = strings.Split(all[:i], "\n")
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) != len(want) {
			t.Fatalf("lines %q, want %q", got, want)
		}
		_ = isFaultLine(all)
	})
}
