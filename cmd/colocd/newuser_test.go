package main

import (
	"net"
	"strings"
	"testing"
)

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
