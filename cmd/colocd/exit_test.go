package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/colocd/colocd/configs"
)

// The exit status tells a launcher's script what happened: 0 a slot, 3 no
// slot (a deny, or no GPU of the fleet), 2 a command line that does not
// parse, 1 anything else.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	// A service whose SLO nothing fits next to: every admit is a deny.
	s := startSidecar(t, "gpu-exit", func(c *configs.Config) { c.Services[0].SLO.P99MS = 0.001 })
	conn := []string{"--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile()}
	job := []string{"--job", "exit-1", "--profile", profilesDir + "/v100-train-step.json", "--memory-mib", "1000"}
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"an unknown command", []string{"frobnicate"}, exitUsage},
		{"an unknown flag", []string{"status", "--frobnicate"}, exitUsage},
		{"a flag value of the wrong type", []string{"admit", "--min-pct", "ten"}, exitUsage},
		{"an argument where none goes", []string{"version", "extra"}, exitUsage},
		{"a deny", append(append([]string{"admit", "--sidecar", "gpu-exit"}, conn...), job...), exitDenied},
		{"no GPU of the fleet takes it", append(append([]string{"place"}, conn...), job...), exitDenied},
		{"no such sidecar", append(append([]string{"admit", "--sidecar", "gpu-none", "--timeout", "2s"}, conn...), job...), exitError},
		{"a missing field", append([]string{"admit", "--sidecar", "gpu-exit"}, conn...), exitError},
		{"a status", append([]string{"status", "--sidecar", "gpu-exit"}, conn...), exitOK},
	} {
		stdout, stderr, err := runCLI(t, tc.args...)
		if got := exitCode(err); got != tc.want {
			t.Errorf("%s: exit %d, want %d (%v)\n%s", tc.name, got, tc.want, err, stderr)
		}
		// What admit and place print is for eval, and eval fails as they
		// did: a deny's comments alone would eval to 0.
		if tc.args[0] != "admit" && tc.args[0] != "place" {
			continue
		}
		sh := exec.Command("bash", "-c", `eval "$OUT"`)
		sh.Env = append(os.Environ(), "OUT="+stdout)
		if serr := sh.Run(); exitOf(serr) != tc.want {
			t.Errorf("%s: eval of its output exits %d, want %d\n%s", tc.name, exitOf(serr), tc.want, stdout)
		}
	}
	// With --json nothing is for eval: the JSON alone.
	stdout, _, err := runCLI(t, append(append([]string{"admit", "--sidecar", "gpu-exit", "--json"}, conn...), job...)...)
	if exitCode(err) != exitDenied || strings.Contains(stdout, "(exit") {
		t.Errorf("admit --json, denied: %v\n%s", err, stdout)
	}
}

// exitOf is a finished command's exit status.
func exitOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestNewUserErrors: what a new user got wrong is said, naming the flag,
// the command or the port, with the right exit status, at once.
func TestNewUserErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"a negative SLO for a sweep", []string{"predict", "--inference", profilesDir + "/v100-infer-200.json", "--training", profilesDir + "/v100-train-step.json",
			"--mode", "mps", "--sweep", "--slo-p99-ms", "-5"}, exitUsage, []string{"--slo-p99-ms", "≥ 0"}},
		{"an unknown flag", []string{"renew", "--frobnicate"}, exitUsage, []string{"renew: unknown flag: --frobnicate", "colocd renew --help"}},
		{"an unknown flag of a subcommand", []string{"profile", "import", "--frobnicate"}, exitUsage, []string{"profile import: unknown flag"}},
		{"no memory for a profile without one", []string{"admit", "--sidecar", "gpu-0", "--job", "j", "--profile", profilesDir + "/v100-train-step.json"},
			exitError, []string{"--memory-mib", "memory_mib"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCLI(t, tt.args...)
			if code := exitCode(err); code != tt.code || err == nil {
				t.Fatalf("%v: exit %d (%v), want %d", tt.args, code, err, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: %q lacks %q", tt.args, err, w)
				}
			}
		})
	}
}

// TestServeOnATakenPort: a second serve on the port of another fails at
// once and names the port, instead of waiting for a server never ready.
func TestServeOnATakenPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	_, _, err = runCLI(t, "serve", "--config", "../../configs/colocd.yaml", "--set", "nats.listen="+addr,
		"--set", "sidecar.data_dir="+t.TempDir(), "--set", "telemetry.http=127.0.0.1:0", "--set", "gpu.backend=sim")
	if err == nil || !strings.Contains(err.Error(), "nats.listen "+addr) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("serve on a taken port: %v; want an error naming nats.listen %s", err, addr)
	}
}

// probe exits 0 on a 2xx and 1 on anything else, with the status printed:
// a container's HEALTHCHECK.
func TestProbe(t *testing.T) {
	t.Parallel()
	s := startSidecar(t, "gpu-probe", nil)
	for _, tc := range []struct {
		path string
		want int
		out  string
	}{
		{"/healthz", exitOK, "200 ok"},
		{"/readyz", exitOK, "200 "},
		{"/nope", exitError, "404 "},
	} {
		out, _, err := runCLI(t, "probe", "--url", "http://"+s.HTTPAddr()+tc.path)
		if exitCode(err) != tc.want || !strings.HasPrefix(out, tc.out) {
			t.Errorf("probe %s: %q, exit %d (%v); want %q, exit %d", tc.path, out, exitCode(err), err, tc.out, tc.want)
		}
	}
	if _, _, err := runCLI(t, "probe", "--url", "127.0.0.1:9464/healthz"); exitCode(err) != exitUsage {
		t.Errorf("probe of a URL without a scheme: %v, want a usage error", err)
	}
}
