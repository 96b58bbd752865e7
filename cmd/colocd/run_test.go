package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/launch"
)

// TestRunCommand is the acceptance path from a shell: colocd run keeps the
// lease of a command that outlives three first terms, gives the command
// the lease's environment without the token, and when the command exits 7
// exits 7 with no lease left.
func TestRunCommand(t *testing.T) {
	t.Parallel()
	s := startSidecar(t, "gpu-run-cli", func(c *configs.Config) {
		// 3 s, not less: on a busy machine the decision and its reply can
		// take a second, and a term that ends before the register is a lost
		// lease, not the renewals this test is about.
		c.Admission.Lease.FirstTerm = 3 * time.Second
	})
	out := t.TempDir() + "/env"
	script := `env > ` + out + `; sleep 10; exit 7`
	stdout, stderr, err := runCLI(t, "run", "--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile(), "--sidecar", "gpu-run-cli",
		"--job", "run-cli-1", "--profile", profilesDir+"/v100-train-step.json", "--memory-mib", "1000", "--lease", "2s",
		"--register-every", "200ms", "--", "sh", "-c", script)
	if code := exitCode(err); code != 7 {
		t.Fatalf("colocd run: exit %d (%v), want the command's 7\nstdout %q\nstderr:\n%s", code, err, stdout, stderr)
	}
	if !silent(err) {
		t.Errorf("run's error %v would print a line of its own; its events said it", err)
	}
	for _, want := range []string{"colocd run: grant (fits) on gpu-run-cli at 100 %", "colocd run: started sh", "colocd run: registered pids",
		"colocd run: sh exited with status 7", "colocd run: lease "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "lease_lost") || strings.Contains(stderr, "is lost") {
		t.Errorf("the lease was lost:\n%s", stderr)
	}
	env, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", "COLOCD_LEASE_ID=", "COLOCD_SIDECAR=gpu-run-cli", "CUDA_MPS_PIPE_DIRECTORY="} {
		if !strings.Contains(string(env), want) {
			t.Errorf("the command's env lacks %q", want)
		}
	}
	if strings.Contains(string(env), "COLOCD_LEASE_TOKEN") {
		t.Error("the command's env holds the lease token")
	}
	nc, err := s.Conn()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Status lists a released lease until its processes are gone: the
	// release is its state.
	st, err := bus.NewClient(nc).Status(context.Background(), "gpu-run-cli")
	if err != nil || len(st.Leases) > 1 || (len(st.Leases) == 1 && st.Leases[0].State != "released") {
		t.Errorf("status after run: %v, leases %+v; want none\n%s", err, st, stderr)
	}
}

// TestRunUsage: a command line run cannot use is a usage error (exit 2)
// that names what is wrong, and nothing is asked.
func TestRunUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--job", "j", "--profile", "p.json", "--sidecar", "gpu-0"}, "want the command to run after --"},
		{[]string{"run", "--job", "j", "--profile", "p.json", "--", "true"}, "--sidecar"},
		{[]string{"run", "--job", "j", "--profile", "p.json", "--sidecar", "gpu-0", "--on-throttle", "signal:KILL", "--", "true"}, "--on-throttle"},
	} {
		_, _, err := runCLI(t, tt.args...)
		if exitCode(err) != exitUsage || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v (exit %d), want a usage error naming %q", tt.args, err, exitCode(err), tt.want)
		}
	}
}

// TestHelpShowsNoSecret: a lease token in the environment never appears in
// a command's help.
func TestHelpShowsNoSecret(t *testing.T) {
	t.Setenv(launch.EnvToken, "secret-token-in-the-env")
	for _, cmd := range []string{"renew", "release", "register", "run", "watch"} {
		out, _, _ := runCLI(t, cmd, "--help")
		if strings.Contains(out, "secret-token-in-the-env") {
			t.Errorf("colocd %s --help prints the lease token", cmd)
		}
	}
}

// TestRunPlacesOnItsNode: --place --node asks only the sidecars on that
// node: none on another node (exit 3, the command never runs), and the
// one on its own node grants.
func TestRunPlacesOnItsNode(t *testing.T) {
	t.Parallel()
	s := startSidecar(t, "gpu-node-a", func(c *configs.Config) { c.Sidecar.Node = "node-a" })
	args := func(node, marker string) []string {
		return []string{"run", "--place", "--node", node, "--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile(),
			"--job", "placed-1", "--profile", profilesDir + "/v100-train-step.json", "--memory-mib", "1000", "--", "sh", "-c", "echo " + marker}
	}
	var out string
	var err error
	// The summary is published at start; wait until place can read it.
	for end := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		out, _, err = runCLI(t, args("node-a", "ran-on-a")...)
		if err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil || !strings.Contains(out, "ran-on-a") {
		t.Fatalf("run --place --node node-a: %v, output %q", err, out)
	}
	out, stderr, err := runCLI(t, args("node-b", "ran-on-b")...)
	if exitCode(err) != exitDenied || strings.Contains(out, "ran-on-b") || !strings.Contains(err.Error(), `node "node-b"`) {
		t.Errorf("run --place --node node-b: exit %d, %v, output %q %q; want 3, naming the node, nothing run", exitCode(err), err, out, stderr)
	}
}
