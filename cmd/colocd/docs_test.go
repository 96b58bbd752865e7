package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/testfiles"
)

// Every relative link in README.md and docs/ names a file that exists
// and, with a #fragment, a heading of that file, as GitHub renders its
// anchors: a reader who follows the tutorial never lands on nothing.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, page := range testfiles.Glob(t, "docs/*.md", "docs/*/*.md", "README.md") {
		for _, m := range link.FindAllStringSubmatch(testfiles.Read(t, page), -1) {
			target, frag, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := page
			if target != "" {
				path = filepath.Join(filepath.Dir(page), target)
			}
			if _, err := os.Stat(testfiles.Path(t, path)); err != nil {
				t.Errorf("%s: link %s: %v", page, m[1], err)
				continue
			}
			checked++
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchors(t, path)[frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, m[1], path, frag)
			}
		}
	}
	if checked < 50 {
		t.Errorf("%d links checked, want the docs' (at least 50)", checked)
	}
}

// anchors are the fragments GitHub gives a Markdown file's headings (path
// from the module's root): lower case, punctuation but '-' and '_'
// dropped, spaces as '-'.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fence := false
	for line := range strings.SplitSeq(testfiles.Read(t, path), "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}
