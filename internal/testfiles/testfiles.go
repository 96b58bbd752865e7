// Package testfiles reads, in tests, the repository's own files (the docs,
// the examples, the deployment files, the test data) by their path from
// the module's root, wherever the test runs, and writes the scratch files
// a test feeds to the code. A missing file fails the test where it is
// named, not later as an empty document.
package testfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the module's root: the nearest folder, from the working
// directory up, that holds go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = up
	}
}

// Path returns the absolute path of rel, a slash-separated path from the
// module's root.
func Path(t testing.TB, rel string) string {
	t.Helper()
	return filepath.Join(Root(t), filepath.FromSlash(rel))
}

// Read returns the content of rel, a path from the module's root.
func Read(t testing.TB, rel string) string {
	t.Helper()
	raw, err := os.ReadFile(Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// Glob returns the files that match patterns (paths from the module's
// root, as filepath.Match reads them), as paths from the root, in order.
// A pattern that matches nothing fails t: a moved page must not turn a
// check into one of nothing.
func Glob(t testing.TB, patterns ...string) []string {
	t.Helper()
	root := Root(t)
	var out []string
	for _, p := range patterns {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if len(matches) == 0 {
			t.Fatalf("no file matches %s", p)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

// Write writes body to the file name in dir and returns its path.
func Write(t testing.TB, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
