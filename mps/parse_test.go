package mps

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// wantOutputError checks that err is an OutputError quoting the output.
func wantOutputError(t *testing.T, err error, out string) {
	t.Helper()
	var oe *OutputError
	if !errors.As(err, &oe) || !errors.Is(err, ErrUnexpectedOutput) {
		t.Fatalf("err = %v, want an *OutputError", err)
	}
	if q := quote(out); !contains(err.Error(), q) {
		t.Fatalf("err = %q, want it to quote the output %s", err, q)
	}
}

// parseCase is one answer of the control binary for a parser: what the
// parser must return, or (ok false) that it must refuse the answer with an
// *OutputError quoting it, or with err when err is set.
type parseCase[T any] struct {
	name string
	out  string
	want T
	ok   bool
	err  error
}

// testParse runs cases against parse, side by side.
func testParse[T any](t *testing.T, parse func(string) (T, error), cases []parseCase[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parse(tt.out)
			if !tt.ok && tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("parse(%q) = %v, want %v", tt.out, err, tt.err)
				}
				return
			}
			if !tt.ok {
				wantOutputError(t, err, tt.out)
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tt.out, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("parse(%q) (-want +got):\n%s", tt.out, diff)
			}
		})
	}
}

func TestParsePIDLines(t *testing.T) {
	t.Parallel()
	cases := []parseCase[[]PID]{
		{name: "empty", out: "", ok: true},
		{name: "one", out: "1234\n", want: []PID{1234}, ok: true},
		{name: "several", out: "1234\n5678\n", want: []PID{1234, 5678}, ok: true},
		{name: "crlf and blank lines", out: "1234\r\n\r\n5678", want: []PID{1234, 5678}, ok: true},
		{name: "spaces", out: "  1234  \n", want: []PID{1234}, ok: true},
		{name: "text", out: "No servers\n"},
		{name: "two on a line", out: "12 34\n"},
		{name: "zero", out: "0\n"},
		{name: "negative", out: "-3\n"},
	}
	for name, parse := range map[string]func(string) ([]PID, error){"server list": parseServerList, "client list": parseClientList} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testParse(t, parse, cases)
		})
	}
}

func TestParseServerStatus(t *testing.T) {
	t.Parallel()
	testParse(t, parseServerStatus, []parseCase[ServerState]{
		{name: "active", out: "ACTIVE\n", want: ServerActive, ok: true},
		{name: "initializing", out: "INITIALIZING", want: ServerInitializing, ok: true},
		{name: "fault", out: " FAULT \n", want: ServerFault, ok: true},
		{name: "unknown state", out: "SLEEPING\n"},
		{name: "lowercase", out: "active\n"},
		{name: "error text", out: "Server 12 not found\n"},
		{name: "empty", out: ""},
	})
}

func TestParsePS(t *testing.T) {
	t.Parallel()
	const header = "PID ID SERVER DEVICE NAMESPACE COMMAND\n"
	testParse(t, parsePS, []parseCase[[]Client]{
		{name: "empty", out: "", ok: true},
		{name: "header only", out: header, ok: true},
		{
			name: "rows",
			out:  header + "12345 0 11111 GPU-5a2c0f3e-8b7d-4c1a 4026531836 python train.py --lr 0.1\n12346 1 11111 GPU-5a2c0f3e-8b7d-4c1a 4026532000 ./infer\n",
			want: []Client{
				{PID: 12345, ID: 0, Server: 11111, Device: "GPU-5a2c0f3e-8b7d-4c1a", Namespace: 4026531836, Command: "python train.py --lr 0.1"},
				{PID: 12346, ID: 1, Server: 11111, Device: "GPU-5a2c0f3e-8b7d-4c1a", Namespace: 4026532000, Command: "./infer"},
			},
			ok: true,
		},
		{
			name: "aligned columns and no command",
			out:  "PID   ID  SERVER  DEVICE                  NAMESPACE   COMMAND\n  77   3    500   GPU-5a2c0f3e-8b7d-4c1a  0\n",
			want: []Client{{PID: 77, ID: 3, Server: 500, Device: "GPU-5a2c0f3e-8b7d-4c1a", Namespace: 0}},
			ok:   true,
		},
		{
			name: "full uuid",
			out:  header + "77 3 500 GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab 1 a\n",
			want: []Client{{PID: 77, ID: 3, Server: 500, Device: "GPU-5a2c0f3e-8b7d-4c1a-9e6f-0123456789ab", Namespace: 1, Command: "a"}},
			ok:   true,
		},
		{name: "no header", out: "12345 0 11111 GPU-5a2c0f3e-8b7d-4c1a 4026531836 x\n"},
		{name: "wrong header", out: "PID SERVER COMMAND\n"},
		{name: "short row", out: header + "12345 0 11111\n"},
		{name: "bad pid", out: header + "x 0 11111 GPU-5a2c0f3e-8b7d-4c1a 1 x\n"},
		{name: "bad id", out: header + "1 -1 11111 GPU-5a2c0f3e-8b7d-4c1a 1 x\n"},
		{name: "bad server", out: header + "1 0 0 GPU-5a2c0f3e-8b7d-4c1a 1 x\n"},
		{name: "bad device", out: header + "1 0 2 /dev/nvidia0 1 x\n"},
		{name: "bad namespace", out: header + "1 0 2 GPU-5a2c0f3e 1x x\n"},
		{name: "plus namespace", out: header + "1 0 2 GPU-5a2c0f3e +1 x\n"},
		{name: "garbage", out: "\x00\xff garbage"},
	})
}

// TestParseDocumentedFormats parses the fixtures written in the formats of
// NVIDIA's MPS documentation (testdata/documented/README.md): inferred, not
// captured on hardware.
func TestParseDocumentedFormats(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		data, err := os.ReadFile("testdata/documented/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	clients, err := parsePS(read("ps.txt"))
	if err != nil || len(clients) != 2 || clients[0].Server != 6120 || clients[1].Command != "./matrixMul" {
		t.Fatalf("ps.txt: %+v, %v", clients, err)
	}
	if err := parseTerminate(read("terminate_client.txt")); err != nil {
		t.Fatalf("terminate_client.txt: %v", err)
	}
	if s, err := parseServerStatus(read("get_server_status.txt")); err != nil || s != ServerActive {
		t.Fatalf("get_server_status.txt: %v, %v", s, err)
	}
	if p, err := parseServerList(read("get_server_list.txt")); err != nil || len(p) != 1 {
		t.Fatalf("get_server_list.txt: %v, %v", p, err)
	}
}

func TestParseValues(t *testing.T) {
	t.Parallel()
	t.Run("percentage", func(t *testing.T) {
		t.Parallel()
		parse := func(s string) (float64, error) { return parsePercentage(verbGetDefaultActiveThreads, s) }
		testParse(t, parse, []parseCase[float64]{
			{name: "percentage float", out: "100.0\n", want: 100.0, ok: true},
			{name: "percentage int", out: "33", want: 33.0, ok: true},
			{name: "percentage fraction", out: "33.3", want: 33.3, ok: true},
			{name: "percentage zero", out: "0"},
			{name: "percentage above 100", out: "100.5"},
			{name: "percentage text", out: "Invalid command"},
			{name: "percentage exponent", out: "1e2"},
		})
	})
	t.Run("pinned memory limit", func(t *testing.T) {
		t.Parallel()
		parse := func(s string) (MemLimit, error) { return parseMemLimit(verbGetDefaultPinnedMemLimit, s) }
		testParse(t, parse, []parseCase[MemLimit]{
			{name: "mem zero", out: "0\n", want: MemLimit(0), ok: true},
			{name: "mem G", out: "10G", want: 10 * GiB, ok: true},
			{name: "mem M", out: "900M", want: 900 * MiB, ok: true},
			{name: "mem MB spaced", out: "8192 MB", want: 8192 * MiB, ok: true},
			{name: "mem GiB fraction", out: "1.5GiB", want: 1536 * MiB, ok: true},
			{name: "mem lowercase", out: "512m", want: 512 * MiB, ok: true},
			{name: "mem hex bytes", out: "0x140000000", want: 5 * GiB, ok: true},
			{name: "mem bare number", out: "10240"},
			{name: "mem too large", out: "99999999999T"},
			{name: "mem text", out: "unlimited"},
		})
	})
	t.Run("priority", func(t *testing.T) {
		t.Parallel()
		testParse(t, parsePriority, []parseCase[Priority]{
			{name: "priority 0", out: "0\n", want: PriorityNormal, ok: true},
			{name: "priority 1 labelled", out: "1 [BELOW NORMAL]", want: PriorityBelowNormal, ok: true},
			{name: "priority wrong label", out: "1 [NORMAL]"},
			{name: "priority 2", out: "2"},
		})
	})
}

// noValue adapts a parser that answers only an error to testParse.
func noValue(parse func(string) error) func(string) (struct{}, error) {
	return func(out string) (struct{}, error) { return struct{}{}, parse(out) }
}

func TestParseTerminateAndEmpty(t *testing.T) {
	t.Parallel()
	t.Run("terminate", func(t *testing.T) {
		t.Parallel()
		testParse(t, noValue(parseTerminate), []parseCase[struct{}]{
			{name: "success", out: "0\n", ok: true},
			{name: "cuda error", out: "999\n", err: ErrTerminateFailed},
			{name: "text", out: "Client not found\n"},
			{name: "empty", out: ""},
		})
	})
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		testParse(t, noValue(func(out string) error { return parseEmpty(verbSetDefaultActiveThreads, out) }), []parseCase[struct{}]{
			{name: "blank", out: " \n", ok: true},
			{name: "text", out: "Invalid percentage\n"},
		})
	})
}

func TestOutputErrorQuotesAPrefix(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 10*maxQuoted)
	err := &OutputError{Command: "ps", Output: long, Reason: "r"}
	if len(err.Error()) > 2*maxQuoted {
		t.Fatalf("error is %d bytes long, want it cut", len(err.Error()))
	}
}
