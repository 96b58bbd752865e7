package credfiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNKeySeedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "launcher.nk")
	pub, err := Ensure(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	again, err := Ensure(path)
	if err != nil || again != pub {
		t.Errorf("second read: %q, %v; want %q", again, err, pub)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(path); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("world-readable seed: %v, want a refusal naming 0600", err)
	}
	bad := filepath.Join(dir, "bad.nk")
	if err := os.WriteFile(bad, []byte("not a seed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(bad); err == nil || !strings.Contains(err.Error(), "user seed") {
		t.Errorf("bad seed: %v", err)
	}
}

// A seed file, or the directory it is in, that anyone may write is
// refused, naming the path: another user could swap it.
func TestPrivatePaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed := filepath.Join(dir, "launcher.nk")
	if _, err := Ensure(seed); err != nil {
		t.Fatalf("a new seed file: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(seed); err == nil || !strings.Contains(err.Error(), "lets anyone write it") || !strings.Contains(err.Error(), dir) {
		t.Errorf("seed in a world-writable directory: %v, want it refused naming %s", err, dir)
	}
	if err := Private(dir); err == nil || !strings.Contains(err.Error(), "lets anyone write it") {
		t.Errorf("a world-writable directory: %v, want it refused", err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil { // sticky, like /tmp: others cannot replace our files
		t.Fatal(err)
	}
	if _, err := Ensure(seed); err != nil {
		t.Errorf("seed in a sticky directory: %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}
