package termtext

import (
	"fmt"
	"strings"
	"unicode"
)

// MaxLen is the most bytes of outside text Clip keeps.
const MaxLen = 512

// LineBreaking reports the runes that would split a line or garble a
// terminal: control characters and the Unicode line and paragraph
// separators.
func LineBreaking(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }

// Line makes s safe on one line of a shell comment or a terminal: control
// characters (newlines, escapes) and the Unicode line and paragraph
// separators are dropped, and the text is clipped.
func Line(s string) string {
	s = strings.Map(func(r rune) rune {
		if LineBreaking(r) {
			return -1
		}
		return r
	}, s)
	return Clip(s)
}

// Clip bounds what is quoted back to the user to MaxLen bytes, cut on a
// rune boundary and marked with an ellipsis.
func Clip(s string) string {
	if len(s) <= MaxLen {
		return s
	}
	cut := MaxLen
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// ShellQuote single-quotes s for a POSIX shell: inside single quotes
// nothing is special, and a quote in s closes, escapes and reopens.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Num is a figure to two decimals, or a dash when it is unknown (nil).
func Num(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *v)
}
