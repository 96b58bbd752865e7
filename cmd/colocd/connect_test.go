package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/launch"
)

// seedFile makes a launcher identity in a fresh directory and returns the
// path of its seed and its public key.
func seedFile(t *testing.T, name string) (path, key string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, name)
	l, err := natsserver.AddLauncherSeedFile(filepath.Join(dir, "launchers"), "someone", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, l.Key
}

// credentials names the identity a command used and where it came from: a
// flag, its environment variable, or none; a seed by its public key.
func TestCredentialsNamed(t *testing.T) {
	t.Parallel()
	seed, key := seedFile(t, "team.nk")
	dflt, dfltKey := seedFile(t, "launcher.nk")
	tests := []struct {
		name        string
		lf          launcherFlags
		changed     []string // flags given on the command line
		want        string
		wantMissing string
	}{
		{name: "none", want: "no credentials (no --nkey or --creds, and COLOCD_NKEY and COLOCD_CREDS are unset)"},
		{name: "nkey flag", lf: launcherFlags{Endpoint: launch.Endpoint{NKey: seed}}, changed: []string{"nkey"},
			want: "the NKey seed file '" + seed + "' (from --nkey, public key " + key + ")"},
		{name: "nkey env", lf: launcherFlags{Endpoint: launch.Endpoint{NKey: seed}},
			want: "the NKey seed file '" + seed + "' (from env COLOCD_NKEY, public key " + key + ")"},
		{name: "a sidecar's default seed", lf: launcherFlags{Endpoint: launch.Endpoint{NKey: dflt}},
			want: "(from env COLOCD_NKEY, public key " + dfltKey + ", a sidecar's default launcher seed)"},
		{name: "unreadable nkey", lf: launcherFlags{Endpoint: launch.Endpoint{NKey: "/no/such.nk"}}, changed: []string{"nkey"},
			want: "the NKey seed file '/no/such.nk' (from --nkey)", wantMissing: "public key"},
		{name: "creds env", lf: launcherFlags{Endpoint: launch.Endpoint{Creds: "/etc/nats/me.creds"}},
			want: "the credentials file '/etc/nats/me.creds' (from env COLOCD_CREDS)"},
		{name: "creds flag", lf: launcherFlags{Endpoint: launch.Endpoint{Creds: "/etc/nats/me.creds"}}, changed: []string{"creds"},
			want: "the credentials file '/etc/nats/me.creds' (from --creds)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := &cobra.Command{Use: "x"}
			var lf launcherFlags
			lf.register(cmd, false)
			for _, f := range tt.changed {
				if err := cmd.Flags().Set(f, "set"); err != nil {
					t.Fatal(err)
				}
			}
			lf.Endpoint = tt.lf.Endpoint
			got := lf.credentials()
			if !strings.Contains(got, tt.want) || (tt.wantMissing != "" && strings.Contains(got, tt.wantMissing)) {
				t.Errorf("credentials() = %q, want it to contain %q (and not %q)", got, tt.want, tt.wantMissing)
			}
			if raw, err := os.ReadFile(seed); err != nil || strings.Contains(got, strings.TrimSpace(string(raw))) {
				t.Errorf("credentials() = %q shows the seed (%v)", got, err)
			}
		})
	}
}

// A connection the embedded server refuses names the credentials used and
// where they came from, says what to do, and is still an authorization
// error to errors.Is. The environment is set here: not parallel.
func TestAuthorizationFailureNamesCredentials(t *testing.T) {
	s := startSidecar(t, "gpu-auth", nil)
	stranger, strangerKey := seedFile(t, "stranger.nk")
	t.Setenv(launch.EnvNKey, "")
	t.Setenv(launch.EnvCreds, "")
	t.Setenv(launch.EnvSidecar, "")
	tests := []struct {
		name string
		env  string // COLOCD_NKEY
		args []string
		want string
	}{
		{name: "no credentials", want: "it was given no credentials (no --nkey or --creds, and COLOCD_NKEY and COLOCD_CREDS are unset)"},
		{name: "an unknown key by flag", args: []string{"--nkey", stranger},
			want: "it was given the NKey seed file '" + stranger + "' (from --nkey, public key " + strangerKey + ")"},
		{name: "an unknown key by env", env: stranger,
			want: "it was given the NKey seed file '" + stranger + "' (from env COLOCD_NKEY, public key " + strangerKey + ")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(launch.EnvNKey, tt.env)
			for _, command := range [][]string{{"status", "--sidecar", "gpu-auth"}, {"renew", "--sidecar", "gpu-auth", "--lease", "l1", "--token", "t1"}} {
				_, _, err := runCLI(t, append(append(command, "--server", s.ClientURL()), tt.args...)...)
				if err == nil {
					t.Fatalf("%s: connected", command[0])
				}
				msg := err.Error()
				for _, want := range []string{command[0] + ": --server " + s.ClientURL() + " refused the connection (nats: authorization violation)",
					tt.want, "colocd launcher add NAME --out NAME.nk", "export COLOCD_NKEY=", "--creds FILE"} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: %q\nlacks %q", command[0], msg, want)
					}
				}
				if !errors.Is(err, nats.ErrAuthorization) || exitCode(err) != exitError {
					t.Errorf("%s: %v is not an authorization error that exits 1", command[0], err)
				}
			}
		})
	}
}

// status and watch without --sidecar: the one sidecar on the bus is
// shown; several are listed with their node and GPU, and --sidecar asked
// for; none is said, with what to check.
func TestStatusWithoutSidecar(t *testing.T) {
	t.Parallel()
	one := startSidecar(t, "gpu-alone", nil)
	shared := connectNATS(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()}).ConnectedUrl()
	for _, id := range []string{"gpu-two", "gpu-one"} {
		startSidecar(t, id, func(c *configs.Config) { c.NATS.URL, c.Sidecar.Node = shared, "node-"+id })
	}
	empty := plainNATS(t).ConnectedUrl()
	anonymous := []string{"--nkey", "", "--creds", ""}
	tests := []struct {
		name       string
		args       []string
		wantOut    string
		wantStderr string
		wantErr    []string
		wantExit   int
	}{
		{name: "one", args: []string{"status", "--server", one.ClientURL(), "--nkey", one.LauncherNKeyFile()},
			wantOut: "sidecar gpu-alone (NVIDIA H200", wantStderr: "colocd: gpu-alone is the one sidecar on the bus (--sidecar not given)"},
		{name: "several", args: append([]string{"status", "--server", shared}, anonymous...),
			wantErr:  []string{"status: --sidecar: want one of the 2 sidecars on the bus, e.g. colocd status --sidecar gpu-one (or export COLOCD_SIDECAR=gpu-one):", "SIDECAR", "NODE", "GPU", "gpu-one", "gpu-two"},
			wantExit: exitUsage},
		{name: "several, watch", args: append([]string{"watch", "--server", shared}, anonymous...),
			wantErr: []string{"watch: --sidecar: want one of the 2 sidecars on the bus, e.g. colocd watch --sidecar gpu-one"}, wantExit: exitUsage},
		{name: "none", args: append([]string{"status", "--server", empty}, anonymous...),
			wantErr: []string{"status: --sidecar not given, and no sidecar answered discovery ($SRV.PING.colocd) on " + empty + " within 1s",
				"is colocd serve running", "--server, env COLOCD_SERVER"}, wantExit: exitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := runCLI(t, append(tt.args, "--sidecar", "")...) // whatever COLOCD_SIDECAR says
			if got := exitCode(err); got != tt.wantExit {
				t.Fatalf("exit %d (%v), want %d", got, err, tt.wantExit)
			}
			if !strings.Contains(stdout, tt.wantOut) || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stdout %q, stderr %q: want %q and %q", stdout, stderr, tt.wantOut, tt.wantStderr)
			}
			for _, want := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v\nwant it to contain %q", err, want)
				}
			}
			if tt.name == "none" && !errors.Is(err, v1.ErrNoSidecar) {
				t.Errorf("err = %v, want v1.ErrNoSidecar", err)
			}
		})
	}
	// The list names each sidecar's node and GPU once its capacity
	// summary is published (just after its start).
	row := regexp.MustCompile(`(?m)^\s+gpu-one\s+node-gpu-one\s+NVIDIA H200$`)
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := runCLI(t, "status", "--server", shared, "--sidecar", "", "--nkey", "", "--creds", "")
		if err != nil && row.MatchString(err.Error()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the list never named gpu-one's node and GPU: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serve prints, beside the launchers' export line, what a nats CLI user
// passes; a connection with that key and inbox prefix discovers the
// sidecar.
func TestServePrintsNATSCLILine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", "../../configs/colocd.yaml", "--set", "nats.listen=127.0.0.1:0", "--set", "sidecar.data_dir=" + dir,
			"--set", "telemetry.http=127.0.0.1:0", "--set", "gpu.backend=sim", "--set", "sidecar.id=gpu-cli-line"}, w, io.Discard)
		w.Close()
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	lines := bufio.NewScanner(r)
	var line string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "nats CLI") {
			line = lines.Text()
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	m := regexp.MustCompile(`^nats CLI \(replies come only to the launcher's own inbox\): nats --server '(\S+)' --nkey '(\S+)' --inbox-prefix (\S+) micro ls colocd$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve printed no nats CLI line, or another: %q", line)
	}
	seed := filepath.Join(dir, "launcher.nk")
	if m[2] != seed || m[3] != v1.LauncherInbox(publicKeyOf(seed)) {
		t.Errorf("nats CLI line %q: want --nkey %s --inbox-prefix %s", line, seed, v1.LauncherInbox(publicKeyOf(seed)))
	}
	opt, err := nats.NkeyOptionFromSeed(m[2])
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(m[1], opt, nats.CustomInboxPrefix(m[3]))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ids, err := bus.NewClient(nc).Sidecars(ctx, 2*time.Second)
	if err != nil || len(ids) != 1 || ids[0] != "gpu-cli-line" {
		t.Errorf("discovery as the nats CLI line says: %v %v", ids, err)
	}
	if natsCLILine("", seed) != "" || natsCLILine(m[1], filepath.Join(dir, "none.nk")) != "" {
		t.Error("a nats CLI line without a listener or a seed")
	}
	if _, err := os.Stat(filepath.Join(dir, "none.nk")); err == nil {
		t.Error("natsCLILine created a seed file")
	}
}
