package configs

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/internal/testfiles"
)

// docs/configuration.md is the reference users read: each key's row gives
// the default Default() has and the environment variable Load reads, so
// that neither drifts from the code.
func TestReferenceMatchesTheConfig(t *testing.T) {
	t.Parallel()
	rows := map[string][]string{}
	for line := range strings.SplitSeq(testfiles.Read(t, "docs/configuration.md"), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[strings.Trim(cells[1], "`")] = cells[2:]
	}
	for _, l := range leaves {
		if strings.HasPrefix(l.key, "services") {
			continue // a list of entries, described field by field
		}
		row, ok := rows[l.key]
		if !ok {
			t.Errorf("docs/configuration.md has no row for %s", l.key)
			continue
		}
		if got, want := row[1], "`"+documented(l.val)+"`"; got != want {
			t.Errorf("%s: the reference's default is %s, Default() has %s", l.key, got, want)
		}
		wantEnv := "—"
		if l.env {
			wantEnv = "`" + EnvName(l.key) + "`"
		}
		if row[2] != wantEnv {
			t.Errorf("%s: the reference's environment variable is %s, Load reads %s", l.key, row[2], wantEnv)
		}
	}
}

// documented is how the reference writes a default.
func documented(v any) string {
	switch x := v.(type) {
	case string:
		if _, err := strconv.ParseFloat(x, 64); x == "" || err == nil {
			return strconv.Quote(x) // "" and "0" are strings, not nothing or a number
		}
		return x
	case time.Duration:
		s := x.String()
		for _, unit := range []string{"m0s", "h0m"} {
			s = strings.Replace(s, unit, unit[:1], 1)
		}
		return s
	case []any:
		return "[]"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}
