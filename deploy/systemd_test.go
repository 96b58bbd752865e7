package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// unitFile is the systemd unit the docs install.
const unitFile = "systemd/colocd.service"

// maxExposure is the highest `systemd-analyze security` exposure the unit
// may have (docs/deployment.md#systemd).
const maxExposure = 5.0

// tool returns the path of a deployment tool, skipping the test when it is
// not installed, unless COLOCD_DEPLOY_TOOLS=1 (make deploy-check) asks for
// every tool, when its absence fails the test.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("COLOCD_DEPLOY_TOOLS") == "1" {
			t.Fatalf("%s is not installed: make deploy-check needs it (%v)", name, err)
		}
		t.Skipf("%s is not installed (make deploy-check installs and requires it)", name)
	}
	return p
}

// systemd's own reading of the unit: no unknown key, no bad value, and an
// exposure of at most maxExposure.
func TestSystemdUnitWithSystemd(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	raw, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's binary exists: point it at one that does.
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, "colocd.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(raw, []byte("/usr/local/bin/colocd"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(analyze, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("verify", unit)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = run("security", "--offline=true", unit)
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security gave no overall level:\n%s", out)
	}
	level, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("systemd-analyze security: exposure %.1f", level)
	if level > maxExposure {
		t.Errorf("exposure %.1f, want at most %.1f:\n%s", level, maxExposure, out)
	}
}

// What the unit must say, whatever systemd's version: it waits for
// colocd's READY=1, and it starts on a host without the MPS directories.
func TestSystemdUnitNotifiesAndMakesItsPaths(t *testing.T) {
	raw, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	for _, want := range []string{"\nType=notify\n", "\nExecStartPre=+/bin/mkdir -p -m 0755 /tmp/nvidia-mps\n", "\nLogsDirectory=nvidia-mps\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("%s lacks %q", unitFile, strings.TrimSpace(want))
		}
	}
	for _, line := range strings.Split(unit, "\n") {
		if p, ok := strings.CutPrefix(line, "ReadWritePaths="); ok {
			for _, path := range strings.Fields(p) {
				if path != "/tmp/nvidia-mps" && !strings.HasPrefix(path, "-") {
					t.Errorf("ReadWritePaths %s: a path no ExecStartPre makes fails the start on a fresh host (226/NAMESPACE); make it or prefix it with -", path)
				}
			}
		}
	}
}
