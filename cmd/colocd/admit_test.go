package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

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
