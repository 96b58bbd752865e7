package natsserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The seed goes to its own file, mode 0600, and the key to the directory;
// an existing seed file is refused and leaves no key behind.
func TestAddLauncherSeedFile(t *testing.T) {
	dir, seeds := t.TempDir(), t.TempDir()
	out := filepath.Join(seeds, "team-a.nk")
	l, err := AddLauncherSeedFile(dir, "team-a", out)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("seed file: %v, %v; want mode 0600", st, err)
	}
	if ls, err := ReadLaunchers(dir); err != nil || len(ls) != 1 || ls[0].Key != l.Key {
		t.Errorf("launchers %+v, %v; want team-a's key", ls, err)
	}
	if _, err := AddLauncherSeedFile(dir, "team-b", out); err == nil || !strings.Contains(err.Error(), "exists: choose another file") {
		t.Errorf("an existing seed file: %v", err)
	}
	if ls, _ := ReadLaunchers(dir); len(ls) != 1 {
		t.Errorf("launchers %+v after a refused add, want team-a alone", ls)
	}
}
