package llm

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/field"
)

// The recorded Azure conversation trace: every request, in order, from 0,
// with its tokens.
func TestParseAzureTrace(t *testing.T) {
	t.Parallel()
	f, err := os.Open(azureConv)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs, err := ParseTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 19366 {
		t.Errorf("%d requests, want 19366", len(reqs))
	}
	// The first row: 2023-11-16 18:15:46.6805900,374,44.
	if reqs[0] != (Request{Arrival: 0, PromptTokens: 374, OutputTokens: 44}) {
		t.Errorf("first request %+v", reqs[0])
	}
	// The last: 2023-11-16 19:14:08.4025270, 58 min 21.721937 s later.
	if got, want := reqs[len(reqs)-1].Arrival, 58*time.Minute+21*time.Second+721937*time.Microsecond; got != want {
		t.Errorf("last arrival %v, want %v", got, want)
	}
	if !slices.IsSortedFunc(reqs, func(a, b Request) int { return int(a.Arrival - b.Arrival) }) {
		t.Error("not sorted")
	}
}

func TestParseTrace(t *testing.T) {
	t.Parallel()
	s := time.Second
	tests := []struct {
		name, in string
		want     []Request
	}{
		{"azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5,10,20\n2023-11-16 18:15:47,30,40\n",
			[]Request{{0, 10, 20}, {s / 2, 30, 40}}},
		{"azure with BOM, CRLF, any case, other columns, out of order",
			"\ufeffid,generatedtokens,timestamp,contexttokens\r\n1,5,2023-11-16 18:15:48,6\r\n2,7,2023-11-16 18:15:46.25,8\r\n",
			[]Request{{0, 8, 7}, {1750 * time.Millisecond, 6, 5}}},
		{"azure without tokens, RFC 3339", "Timestamp\n2023-11-16T18:15:46Z\n2023-11-16T18:15:46.001Z\n",
			[]Request{{0, 0, 0}, {time.Millisecond, 0, 0}}},
		{"plain seconds", "# a comment\n\n1.5\n0.5 100 20 # trailing\n2,3,4\n", []Request{{0, 100, 20}, {s, 0, 0}, {3 * s / 2, 3, 4}}},
		{"plain with BOM and tabs", "\ufeff3\t7\n", []Request{{0, 7, 0}}},
		{"plain RFC 3339", "2024-01-01T00:00:01Z 5 6\n2024-01-01T00:00:00.5+00:00\n", []Request{{0, 0, 0}, {s / 2, 5, 6}}},
		{"plain, no final newline", "0\n2.25", []Request{{0, 0, 0}, {2250 * time.Millisecond, 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseTrace(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// An error names the line and the column, and says what was expected.
func TestParseTraceErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", []string{"want at least one request"}},
		{"comments only", "# nothing\n", []string{"want at least one request"}},
		{"azure bad time", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,1\nyesterday,2\n",
			[]string{"line 3: column 1 (TIMESTAMP): want a time like 2023-11-16 18:15:46.6805900", `got "yesterday"`}},
		{"azure bad tokens", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,-2\n",
			[]string{"line 2: column 3 (GeneratedTokens): want a token count in [0, 1048576]", `got "-2"`}},
		{"azure too many tokens", "timestamp,contexttokens\n2023-11-16 18:15:46,1048577\n",
			[]string{"line 2: column 2 (contexttokens): want a token count"}},
		{"azure short record", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46\n",
			[]string{"line 2: column 2 (ContextTokens): want a field"}},
		{"azure bad quote", "TIMESTAMP\n\"2023\"x\n", []string{"line 2: column", "want a CSV record"}},
		{"azure beyond a year", "TIMESTAMP\n2023-11-16 18:15:46\n2025-11-16 18:15:46\n",
			[]string{"line 3: column 1 (TIMESTAMP): want a time within 8784h0m0s of line 2's"}},
		{"plain mixed kinds", "1.5\n2024-01-01T00:00:00Z\n", []string{"line 2: column 1 (arrival): want seconds", "as on the first line"}},
		{"plain mixed kinds the other way", "2024-01-01T00:00:00Z\n3\n", []string{"line 2: column 1 (arrival): want an RFC 3339 time"}},
		{"plain negative", "-1\n", []string{"line 1: column 1 (arrival): want seconds in [0, 3.16224e+07]"}},
		{"plain NaN", "0\nNaN\n", []string{"line 2: column 1 (arrival): want seconds"}},
		{"plain bad tokens", "1 x\n", []string{"line 1: column 2 (prompt tokens): want a token count", `got "x"`}},
		{"plain bad output", "1 2 3.5\n", []string{"line 1: column 3 (output tokens): want a token count"}},
		{"plain extra field", "1 2 3 4\n", []string{"line 1: column 4 (extra): want at most 3 fields"}},
		{"plain long line", "1\n" + strings.Repeat(" ", MaxTraceLine+1) + "\n", []string{"line 2: want a line of at most 4096 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseTrace(strings.NewReader(tt.in))
			if !errors.Is(err, ErrTrace) {
				t.Fatalf("err = %v, want ErrTrace", err)
			}
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Want == "" {
				t.Errorf("err = %v, want a *field.Error saying what it wants", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestParseTraceLimits(t *testing.T) {
	t.Parallel()
	_, err := parseTrace(strings.NewReader("1\n2\n3\n"), limits{bytes: 1 << 20, requests: 2})
	if err == nil || !strings.Contains(err.Error(), "line 3: want at most 2 requests") {
		t.Errorf("err = %v, want the request bound at line 3", err)
	}
	for _, in := range []string{strings.Repeat("1\n", 100), "TIMESTAMP\n" + strings.Repeat("2023-11-16 18:15:46\n", 10)} {
		_, err = parseTrace(strings.NewReader(in), limits{bytes: 64, requests: 1000})
		if !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), "want at most 64 bytes") {
			t.Errorf("err = %v, want the byte bound", err)
		}
	}
}

// FuzzParseTrace: no input panics, and a trace that parses is sorted,
// starts at 0, and stays within the bounds.
func FuzzParseTrace(f *testing.F) {
	for _, s := range []string{
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:46.1,1,2\n",
		"\ufefftimestamp\r\n2023-11-16T18:15:46Z\r\n",
		"# c\n1.5 10 20\n0.25,3,4\n",
		"2024-01-01T00:00:01Z 5 6\n2024-01-01T00:00:00Z\n",
		"1e9\n", "\"x", "TIMESTAMP\n\"a\nb\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		reqs, err := ParseTrace(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrTrace) {
				t.Fatalf("err = %v, not ErrTrace", err)
			}
			return
		}
		if len(reqs) == 0 || reqs[0].Arrival != 0 {
			t.Fatalf("parsed %d requests, the first at %v", len(reqs), reqs)
		}
		for i, r := range reqs {
			if r.Arrival < 0 || r.Arrival > MaxTraceSpan || i > 0 && r.Arrival < reqs[i-1].Arrival ||
				r.PromptTokens < 0 || r.PromptTokens > MaxTraceTokens || r.OutputTokens < 0 || r.OutputTokens > MaxTraceTokens {
				t.Fatalf("request %d: %+v", i, r)
			}
		}
	})
}
