package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/credfiles"
	"github.com/colocd/colocd/internal/testpki"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestLauncherCommands drives a real sidecar (embedded NATS on a free port,
// simulated H200) with the launcher's commands: admit prints lines a shell
// can eval, and register, renew, status and release work from them.
func TestLauncherCommands(t *testing.T) {
	t.Parallel()
	s := startSidecar(t, "gpu-cli", nil)
	conn := []string{"--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile(), "--sidecar", "gpu-cli"}
	out, _, err := runCLI(t, append([]string{"admit", "--job", "cli-1", "--profile", profilesDir + "/v100-train-step.json",
		"--memory-mib", "1000", "--processes", "2", "--request-id", "cli-request-0123456789abcdef"}, conn...)...)
	if err != nil {
		t.Fatalf("admit: %v\n%s", err, out)
	}
	for _, want := range []string{"# grant (fits)", "export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='100'", "export COLOCD_LEASE_TOKEN='", "export COLOCD_SIDECAR='gpu-cli'"} {
		if !strings.Contains(out, want) {
			t.Errorf("admit output lacks %q:\n%s", want, out)
		}
	}
	// A POSIX shell evals it and sees the variables.
	if sh, err := exec.LookPath("sh"); err == nil {
		got, err := exec.Command(sh, "-c", out+"\necho \"$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT $COLOCD_SIDECAR\"").Output()
		if err != nil || strings.TrimSpace(string(got)) != "0=1000M gpu-cli" {
			t.Errorf("eval of admit's output: %v %q", err, got)
		}
	}
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(line, "export ") {
			env[k] = strings.Trim(v, "'")
		}
	}
	lease := []string{"--lease", env["COLOCD_LEASE_ID"], "--token", env["COLOCD_LEASE_TOKEN"]}
	steps := []struct {
		args []string
		want string
	}{
		{append(append([]string{"register", "101", "102"}, conn...), lease...), "registered 2 processes"},
		{append(append([]string{"renew"}, conn...), lease...), "renewed until"},
		{append([]string{"status"}, conn...), "cli-1"},
		{append([]string{"status"}, conn...), "predicted p99 ms  up to ms"},
		{append(append([]string{"release"}, conn...), lease...), "released"},
	}
	for _, st := range steps {
		out, _, err := runCLI(t, st.args...)
		if err != nil || !strings.Contains(out, st.want) {
			t.Errorf("%s: %v, output %q, want %q", st.args[0], err, out, st.want)
		}
	}
	_, _, err = runCLI(t, append(append([]string{"renew"}, conn...), lease...)...)
	if err == nil || !strings.Contains(err.Error(), "sidecar refused (404)") {
		t.Errorf("renew after release: %v, want a 404", err)
	}
	// admit --json prints the answer and the token the answer lacks.
	out, _, err = runCLI(t, append([]string{"admit", "--job", "cli-json", "--profile", profilesDir + "/v100-train-step.json",
		"--memory-mib", "1000", "--json"}, conn...)...)
	var js struct {
		Decision string `json:"decision"`
		Lease    struct {
			ID string `json:"id"`
		} `json:"lease"`
		LeaseToken string `json:"lease_token"`
	}
	if err != nil || json.Unmarshal([]byte(out), &js) != nil || js.Decision != "grant" || js.Lease.ID == "" || js.LeaseToken == "" {
		t.Fatalf("admit --json: %v, %+v\n%s", err, js, out)
	}
	jsLease := []string{"--lease", js.Lease.ID, "--token", js.LeaseToken}
	if out, _, err := runCLI(t, append(append([]string{"renew"}, conn...), jsLease...)...); err != nil || !strings.Contains(out, "renewed until") {
		t.Errorf("renew with admit --json's lease_token: %v, %q", err, out)
	}
	// Released, so that the GPU is free again for the quotes below.
	if out, _, err := runCLI(t, append(append([]string{"release"}, conn...), jsLease...)...); err != nil || !strings.Contains(out, "released") {
		t.Errorf("release with admit --json's lease_token: %v, %q", err, out)
	}
	// The 200 KB profile fits in a message, so auto sends it inline. The
	// embedded server lets launchers write no stream: ref with no sidecar
	// named (a direct put) is refused; with one named the profile is
	// uploaded through it, and admit and quote send its reference.
	// --wait 1m: the quote ends once the one live sidecar answered, however
	// slow a busy machine makes it.
	quote := []string{"quote", "--job", "cli-2", "--profile", profilesDir + "/v100-train-step.json", "--memory-mib", "1000", "--wait", "1m", "--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile()}
	for _, mode := range []string{"inline", "auto"} {
		out, _, err := runCLI(t, append(quote, "--send-profile", mode)...)
		if err != nil || !strings.Contains(out, "gpu-cli  grant") {
			t.Errorf("quote --send-profile %s: %v, output %q", mode, err, out)
		}
	}
	if _, _, err := runCLI(t, append(quote, "--send-profile", "ref", "--timeout", "1s")...); err == nil || !strings.Contains(err.Error(), "--send-profile ref") {
		t.Errorf("quote --send-profile ref as a launcher: %v, want a refusal", err)
	}
	if out, _, err := runCLI(t, append(quote, "--send-profile", "ref", "--sidecar", "gpu-cli")...); err != nil || !strings.Contains(out, "gpu-cli  grant") {
		t.Errorf("quote --send-profile ref --sidecar: %v, output %q", err, out)
	}
	out, _, err = runCLI(t, append([]string{"admit", "--job", "cli-3", "--profile", profilesDir + "/v100-train-step.json",
		"--memory-mib", "1000", "--send-profile", "ref"}, conn...)...)
	if err != nil || !strings.Contains(out, "# grant (fits)") {
		t.Errorf("admit --send-profile ref: %v, output %q", err, out)
	}
	if _, _, err := runCLI(t, append(quote, "--send-profile", "bogus")...); err == nil || !strings.Contains(err.Error(), `--send-profile: want auto, inline or ref, got "bogus"`) {
		t.Errorf("quote --send-profile bogus: %v", err)
	}
	_, _, err = runCLI(t, "status", "--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile(), "--sidecar", "no-such-gpu")
	if err == nil || !strings.Contains(err.Error(), "no sidecar answered") {
		t.Errorf("status of a missing sidecar: %v", err)
	}
}

// A sidecar whose embedded listener speaks mutual TLS: the launcher
// commands reach it with --tls-ca, --tls-cert, --tls-key and --nkey.
func TestLauncherOverMutualTLS(t *testing.T) {
	t.Parallel()
	pki := testpki.Write(t, t.TempDir())
	s := startSidecar(t, "gpu-tls", func(c *configs.Config) {
		c.NATS.ServerTLS = natsserver.ServerTLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}
	})
	args := []string{"status", "--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile(), "--sidecar", "gpu-tls", "--timeout", "5s"}
	if out, _, err := runCLI(t, append(args, "--tls-ca", pki.CA, "--tls-cert", pki.ClientCert, "--tls-key", pki.ClientKey)...); err != nil || !strings.Contains(out, "sidecar gpu-tls") {
		t.Errorf("status over mutual TLS: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, append(args, "--tls-ca", pki.CA)...); err == nil {
		t.Error("status without a client certificate succeeded")
	}
}

// colocd place on one embedded sidecar: it reads the summary, quotes,
// admits, and prints what admit prints; the quote ends as soon as the one
// live sidecar answered, long before --wait.
func TestPlaceCommand(t *testing.T) {
	t.Parallel()
	s := startSidecar(t, "gpu-place", nil)
	conn := []string{"--server", s.ClientURL(), "--nkey", s.LauncherNKeyFile()}
	var out string
	var err error
	for range 100 { // the summary is published just after the start
		out, _, err = runCLI(t, append([]string{"place", "--job", "placed-1", "--profile", profilesDir + "/v100-train-step.json", "--memory-mib", "1000"}, conn...)...)
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("place: %v\n%s", err, out)
	}
	for _, want := range []string{"# placed on gpu-place: 1 sidecars summarised, 1 could take it, 1 quoted, admitted at the first tried", "# grant (fits)", "export COLOCD_SIDECAR='gpu-place'", "export COLOCD_LEASE_TOKEN='"} {
		if !strings.Contains(out, want) {
			t.Errorf("place output lacks %q:\n%s", want, out)
		}
	}
	// --wait 1h: only the expected answers can end it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, _, err = runCLI(t, append([]string{"quote", "--job", "q-1", "--profile", profilesDir + "/v100-train-step.json", "--memory-mib", "1000", "--wait", "1h", "--timeout", "1h"}, conn...)...)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute): // a watchdog, not a speed check: the quote would otherwise run for an hour
		t.Fatal("quote did not stop once the one live sidecar answered")
	}
	if err != nil || !strings.Contains(out, "gpu-place  grant") {
		t.Fatalf("quote: %v\n%s", err, out)
	}
}

// An admit whose answer never came may still have taken a lease: the CLI
// prints the request id and token that get that decision back, and a
// retry with them returns the lease the first try took, not a second one.
// The first try reaches a subscriber that keeps it and never answers; it
// is then delivered to the real sidecar, as a late request would be.
func TestAdmitWithoutAnswer(t *testing.T) {
	t.Parallel()
	nc := connectNATS(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()})
	url := nc.ConnectedUrl()
	stalled, err := nc.SubscribeSync(v1.EndpointSubject("gpu-late", v1.EndpointAdmit))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"admit", "--sidecar", "gpu-late", "--server", url, "--job", "late-1",
		"--profile", profilesDir + "/v100-train-step.json", "--memory-mib", "1000", "--send-profile", "inline"}
	_, stderr, err := runCLI(t, append(args, "--timeout", "500ms")...)
	if err == nil {
		t.Fatal("admit without an answer succeeded")
	}
	m := regexp.MustCompile(`--sidecar gpu-late --request-id (\S+) --token (\S+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no retry hint on stderr: %v\n%s", err, stderr)
	}
	first, err := stalled.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := stalled.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	var sent v1.AdmitRequest
	if err := json.Unmarshal(first.Data, &sent); err != nil || sent.RequestID != m[1] || sent.TokenSHA256 != v1.TokenSHA256(m[2]) {
		t.Fatalf("the hint (%s, token %s) is not what was sent (%s, %s): %v", m[1], m[2], sent.RequestID, sent.TokenSHA256, err)
	}
	// The first try arrives late at the real sidecar, which grants it.
	startSidecar(t, "gpu-late", func(c *configs.Config) { c.NATS.URL = url })
	resp, err := nc.Request(first.Subject, first.Data, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var d v1.Decision
	if err := json.Unmarshal(resp.Data, &d); err != nil || d.Lease == nil {
		t.Fatalf("the late first try: %v %s", err, resp.Data)
	}
	out, stderr, err := runCLI(t, append(args, "--request-id", m[1], "--token", m[2])...)
	if err != nil {
		t.Fatalf("retry: %v\n%s", err, stderr)
	}
	for _, want := range []string{"export COLOCD_LEASE_ID='" + d.Lease.ID + "'", "export COLOCD_LEASE_TOKEN='" + m[2] + "'"} {
		if !strings.Contains(out, want) {
			t.Errorf("retry output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := runCLI(t, append(args, "--token", m[2])...); err == nil || !strings.Contains(err.Error(), "--request-id") {
		t.Errorf("--token without --request-id: %v", err)
	}
}

// TestAdmitOutputSurvivesHostileReplies: a forged sidecar (a plain
// nats-server and a subscriber on colocd.v1.<id>.admit) answers with fields
// built to run commands when the launcher evals admit's output. Whatever
// admit prints, a POSIX shell that evals it runs nothing: each attempt
// would create a file, and none may exist afterwards.
func TestAdmitOutputSurvivesHostileReplies(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no POSIX shell")
	}
	nc := plainNATS(t)
	reply := make(chan string, 1)
	sub, err := nc.Subscribe("colocd.v1.gpu-x.admit", func(m *nats.Msg) { _ = m.Respond([]byte(<-reply)) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pwn := func(n string) string { return "touch " + filepath.Join(dir, "pwned-"+n) }
	// grant builds a grant whose fields are valid unless a case overrides one.
	grant := func(over map[string]string) string {
		f := map[string]string{
			"code": `"fits"`, "message": `"ok"`, "service": `"chat"`, "id": `"L1"`, "token": `"tok"`, "job": `"j"`,
			"sidecar": `"gpu-x"`, "env": `{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE":"50"}`,
		}
		for k, v := range over {
			f[k] = v
		}
		return `{"decision":"grant","reason":{"code":` + f["code"] + `,"message":` + f["message"] + `},` +
			`"predictions":[{"service":` + f["service"] + `,"slo_p99_ms":100,"solo_p99_ms":10,"predicted_p99_ms":50}],` +
			`"lease":{"id":` + f["id"] + `,"token":` + f["token"] + `,"job_id":` + f["job"] + `,"owner":"o",` +
			`"expires_at":"2026-12-01T00:00:00Z","active_thread_pct":50,"pinned_mem_limit_mib":10,"env":` + f["env"] + f["instance"] + `},` +
			`"sidecar":` + f["sidecar"] + `}`
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	const lentUUID = "MIG-0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"
	tests := []struct {
		name    string
		reply   string
		wantErr string // "" when admit may print a grant
	}{
		{"newline in reason.message", grant(map[string]string{"message": q("ok\n" + pwn("1"))}), ""},
		{"unicode separators and CR in message", grant(map[string]string{"message": q("ok\r\u2028\u0085" + pwn("2"))}), ""},
		{"newline in predictions[].service", grant(map[string]string{"service": q("chat\n" + pwn("3") + "\n#")}), ""},
		{"newline in lease.job_id", grant(map[string]string{"job": q("j\n" + pwn("4"))}), ""},
		{"command in an env value", grant(map[string]string{"env": `{"CUDA_MPS_PIPE_DIRECTORY":` + q("$("+pwn("5")+")';"+pwn("5b")+";'`"+pwn("5c")+"`") + `}`}), ""},
		{"command in reason.code", grant(map[string]string{"code": q("fits\n" + pwn("6"))}), "reason.code"},
		{"command in lease.id", grant(map[string]string{"id": q("L1;" + pwn("7") + ";")}), "lease.id"},
		{"a token in the reply is ignored", grant(map[string]string{"token": q("t';" + pwn("8") + ";'")}), ""},
		{"command in an env key", grant(map[string]string{"env": `{` + q("X=1;"+pwn("9")+";Y") + `:"1"}`}), "lease.env"},
		{"env key outside the allow-list", grant(map[string]string{"env": `{"LD_PRELOAD":"/tmp/evil.so"}`}), "lease.env"},
		{"a MIG device to use", grant(map[string]string{"env": `{"CUDA_VISIBLE_DEVICES":"MIG-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40"}`}), ""},
		{"other devices to use", grant(map[string]string{"env": `{"CUDA_VISIBLE_DEVICES":"0,1"}`}), "lease.env.CUDA_VISIBLE_DEVICES"},
		{"a lent instance", grant(map[string]string{"code": `"free_instance"`, "env": `{"CUDA_VISIBLE_DEVICES":"` + lentUUID + `"}`,
			"instance": `,"instance":{"uuid":"` + lentUUID + `","profile":` + q("4g.71gb\n"+pwn("13")) + `,"sms":64,"memory_mib":71168}`}), ""},
		{"a lent instance with a forged uuid", grant(map[string]string{"env": `{"CUDA_VISIBLE_DEVICES":"` + lentUUID + `"}`,
			"instance": `,"instance":{"uuid":` + q("MIG-x;"+pwn("14")) + `,"profile":"4g","sms":64,"memory_mib":1}`}), "lease.instance.uuid"},
		{"a lent instance that is not the job's device", grant(map[string]string{"env": `{"CUDA_VISIBLE_DEVICES":"MIG-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40"}`,
			"instance": `,"instance":{"uuid":"` + lentUUID + `","profile":"4g.71gb","sms":64,"memory_mib":71168}`}), "lease.env.CUDA_VISIBLE_DEVICES: want the lent instance's UUID"},
		{"a lent instance behind an MPS daemon", grant(map[string]string{"env": `{"CUDA_VISIBLE_DEVICES":"` + lentUUID + `","CUDA_MPS_PIPE_DIRECTORY":"/tmp/x"}`,
			"instance": `,"instance":{"uuid":"` + lentUUID + `","profile":"4g.71gb","sms":64,"memory_mib":71168}`}), "lease.env.CUDA_MPS_PIPE_DIRECTORY"},
		{"another sidecar's name", grant(map[string]string{"sidecar": q("gpu-y;" + pwn("10"))}), "sidecar"},
		{"unknown decision", `{"decision":"grant;` + pwn("11") + `","reason":{"code":"fits","message":""},"sidecar":"gpu-x"}`, "decision"},
		{"grant without a lease", `{"decision":"grant","reason":{"code":"fits","message":""},"sidecar":"gpu-x"}`, "lease"},
		{"deny with a newline", `{"decision":"deny","reason":{"code":"max_jobs","message":` + q("no\n"+pwn("12")) + `},"sidecar":"gpu-x"}`, "denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			select { // a case that failed before it asked left its reply
			case <-reply:
			default:
			}
			reply <- tt.reply
			out, _, err := runCLI(t, "admit", "--server", nc.ConnectedUrl(), "--sidecar", "gpu-x", "--job", "j", "--memory-mib", "1000",
				"--profile", profilesDir+"/v100-train-step.json", "--send-profile", "inline")
			if tt.wantErr == "" && err != nil {
				t.Fatalf("admit: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("admit: error %v, want one naming %q", err, tt.wantErr)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			for i, line := range lines {
				// A failed admit's last line sets eval's status: (exit N).
				if i == len(lines)-1 && err != nil && line == fmt.Sprintf("(exit %d)", exitCode(err)) {
					continue
				}
				if line != "" && !strings.HasPrefix(line, "# ") && !strings.HasPrefix(line, "export ") {
					t.Errorf("line %q is neither a comment nor an export", line)
				}
			}
			cmd := exec.Command(sh, "-c", out+"\necho \"$CUDA_MPS_PIPE_DIRECTORY\"")
			cmd.Dir = dir
			got, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("eval: %v\n%s\n--- admit printed:\n%s", err, got, out)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				t.Errorf("eval ran a command: %s exists\n--- admit printed:\n%s", e.Name(), out)
				os.Remove(filepath.Join(dir, e.Name()))
			}
			if tt.name == "command in an env value" && !strings.Contains(string(got), "$(touch") {
				t.Errorf("the value was not kept literally: %q", got)
			}
		})
	}
	// --json prints the deny as JSON and still exits 3 (docs/cli.md).
	reply <- `{"decision":"deny","reason":{"code":"max_jobs","message":"full"},"sidecar":"gpu-x"}`
	out, _, err := runCLI(t, "admit", "--json", "--server", nc.ConnectedUrl(), "--sidecar", "gpu-x", "--job", "j", "--memory-mib", "1000",
		"--profile", profilesDir+"/v100-train-step.json", "--send-profile", "inline")
	if err == nil || !strings.Contains(err.Error(), "denied (max_jobs)") || !strings.Contains(out, `"decision": "deny"`) || exitCode(err) != exitDenied {
		t.Errorf("admit --json of a deny: error %v (exit %d), output %q; want the JSON and exit 3", err, exitCode(err), out)
	}
}

// colocd launcher add writes the seed for its owner and the public key for
// the sidecar; list shows it; remove takes it away; a name twice, or a
// seed file that exists, is refused without writing anything.
func TestLauncherIdentityCommands(t *testing.T) {
	t.Parallel()
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "team-a.nk")
	stdout, _, err := runCLI(t, "launcher", "add", "team-a", "--dir", dir, "--out", out, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var added struct {
		Name, Key string
		SeedFile  string `json:"seed_file"`
	}
	if err := json.Unmarshal([]byte(stdout), &added); err != nil || added.Name != "team-a" || !strings.HasPrefix(added.Key, "U") {
		t.Fatalf("add printed %q (%v)", stdout, err)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v, %v; want mode 0600", fi, err)
	}
	if pub, err := credfiles.Ensure(out); err != nil || pub != added.Key {
		t.Errorf("the seed's key %q (%v), want %q", pub, err, added.Key)
	}
	if _, _, err := runCLI(t, "launcher", "add", "team-a", "--dir", dir, "--out", out+".2"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("adding team-a twice: %v", err)
	}
	if _, err := os.Stat(out + ".2"); err == nil {
		t.Error("a refused add left a seed file")
	}
	if _, _, err := runCLI(t, "launcher", "add", "team-b", "--dir", dir, "--out", out); err == nil || !strings.Contains(err.Error(), "--out") {
		t.Errorf("an existing --out: %v", err)
	}
	if _, _, err := runCLI(t, "launcher", "add", "../evil", "--dir", dir, "--out", out+".3"); err == nil || !strings.Contains(err.Error(), "launcher name") {
		t.Errorf("a name with a path in it: %v", err)
	}
	stdout, _, err = runCLI(t, "launcher", "list", "--dir", dir)
	if err != nil || !strings.Contains(stdout, "team-a") || !strings.Contains(stdout, added.Key) || strings.Contains(stdout, "team-b") {
		t.Errorf("list: %q, %v", stdout, err)
	}
	if _, _, err := runCLI(t, "launcher", "remove", "team-a", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	if stdout, _, err = runCLI(t, "launcher", "list", "--dir", dir, "--json"); err != nil || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list after remove: %q, %v", stdout, err)
	}
}
