package launch

import (
	"regexp"
	"strings"
	"testing"
	"unicode"

	v1 "github.com/colocd/colocd/api/v1"
)

// exportLine is what a safe export looks like: an allowed name and one
// single-quoted word in which a quote only appears as '\”.
var exportLine = regexp.MustCompile(`^export [A-Z_][A-Z0-9_]*='([^']|'\\'')*'$`)

// FuzzWriteEnv: whatever a reply holds, WriteEnv prints (what admit prints) only comment lines
// without control characters and export lines a shell reads as one
// assignment of a literal value.
func FuzzWriteEnv(f *testing.F) {
	f.Add("grant", "fits", "ok", "chat", "L1", "tok", "j", "CUDA_MPS_PIPE_DIRECTORY", "/tmp/x")
	f.Add("deny", "max_jobs", "no\nrm -rf", "a\nb", "L;1", "t'", "j\r", "X;Y", "$(id)")
	f.Add("throttle", "throttled_to_fit", "\u2028", "s", "ID-2", "tok", "job", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50';id;'")
	f.Fuzz(func(t *testing.T, decision, code, message, service, id, token, job, envKey, envVal string) {
		d := &v1.Decision{Decision: decision, Reason: v1.Reason{Code: code, Message: message}, Sidecar: "gpu-x",
			Predictions: []v1.ServicePrediction{{Service: service}},
			Lease:       &v1.Lease{ID: id, Token: token, JobID: job, ActiveThreadPct: 50, Env: map[string]string{envKey: envVal}}}
		var out strings.Builder
		_ = WriteEnv(&out, d, &Endpoint{Sidecar: "gpu-x", Server: "nats://x"}, token)
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			switch {
			case line == "":
			case strings.HasPrefix(line, "# "):
				if strings.ContainsFunc(line, unicode.IsControl) {
					t.Fatalf("comment with a control character: %q", line)
				}
			case !exportLine.MatchString(line):
				t.Fatalf("unsafe line: %q", line)
			}
		}
	})
}
