package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"fits the SLO":       "fits the SLO", // plain
		"a\nrm -rf /\x1b[2J": "arm -rf /[2J", // a newline and an escape
		"a\u2028b\u2029c":    "abc",          // Unicode separators
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", MaxLen) // two bytes each: the cut falls inside one
	got := Clip(long)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > MaxLen+len("…") {
		t.Errorf("clipped to %d bytes, valid %v: want at most %d and an ellipsis", len(got), utf8.ValidString(got), MaxLen)
	}
	if got := Clip("short"); got != "short" {
		t.Errorf("got %q, want it unchanged", got)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"": "''", "a b": "'a b'", "it's": `'it'\''s'`, "$(id)": "'$(id)'"} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestNum(t *testing.T) {
	v := 12.345
	if got := Num(&v); got != "12.35" {
		t.Errorf("Num(12.345) = %q, want 12.35", got)
	}
	if got := Num(nil); got != "—" {
		t.Errorf("Num(nil) = %q, want a dash", got)
	}
}
