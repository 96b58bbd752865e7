package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A write replaces the file whole and leaves no temporary file; a write
// that cannot land keeps the old content.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "chart.svg")
	for _, content := range []string{"first", "second, longer"} {
		if err := Write(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644", fi.Mode(), err)
	}
	// A directory in the way: the rename fails, nothing is left behind.
	sub := filepath.Join(dir, "taken")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(sub, []byte("x"), 0o644); err == nil {
		t.Error("writing over a non-empty directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("dir holds %v, want only the file and the directory", ents)
	}
	if err := Write(filepath.Join(dir, "missing", "f"), nil, 0o644); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

// A link is written through: its target gets the content, the link stays
// a link. A device is refused, not replaced by a file.
func TestWriteThroughLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "real.svg")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.svg")
	if err := os.Symlink("real.svg", link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "new" {
		t.Errorf("target holds %q, %v; want the new content", got, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link %v, %v: want it still a link", fi.Mode(), err)
	}
	if err := Write(os.DevNull, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("writing %s: %v, want it refused", os.DevNull, err)
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatalf("%s is no longer a device: %v %v", os.DevNull, fi.Mode(), err)
	}
}
