package launch

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/internal/termtext"
)

// What `colocd admit` prints is eval'd by a shell, and it comes from a reply
// on NATS that anyone able to publish there could have forged. Nothing of the
// reply reaches the output unchecked: env keys come from a fixed allow-list,
// ids match their documented character sets, every value is single-quoted,
// and comment text loses its control characters (a newline would end the
// comment and start a command).

// sidecarEnv is every variable a sidecar may ask a job to set: the lease's
// id and admission's MPS client environment. Anything else in a reply is
// refused.
var sidecarEnv = v1.GrantEnv

var (
	envKeyRe  = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	leaseIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	codeRe    = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)
	// migRe is a MIG device's UUID, the one value CUDA_VISIBLE_DEVICES may
	// take in a reply.
	migRe = regexp.MustCompile(`^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// ErrHostileReply marks a reply that cannot have come from a colocd sidecar.
var ErrHostileReply = errors.New("the reply is not a valid colocd decision (refusing to print it for eval)")

// ErrDenied marks the answer no: WriteEnv printed why, and no export.
var ErrDenied = errors.New("denied")

// CheckDecision verifies every field of an admit's reply that WriteEnv
// prints; the error names the field.
func CheckDecision(d *v1.Decision, sidecar string) error {
	bad := func(field, want string, got any) error {
		return fmt.Errorf("%w: %s: want %s, got %q", ErrHostileReply, field, want, termtext.Clip(fmt.Sprint(got)))
	}
	switch d.Decision {
	case v1.DecisionGrant, v1.DecisionThrottle, v1.DecisionDeny:
	default:
		return bad("decision", "grant, throttle or deny", d.Decision)
	}
	if !codeRe.MatchString(d.Reason.Code) {
		return bad("reason.code", "lower-case letters, digits and '_'", d.Reason.Code)
	}
	if d.Sidecar != sidecar {
		return bad("sidecar", fmt.Sprintf("the sidecar asked (%q)", sidecar), d.Sidecar)
	}
	if d.Decision == v1.DecisionDeny {
		return nil
	}
	l := d.Lease
	if l == nil {
		return bad("lease", "a lease with a grant", "none")
	}
	if !leaseIDRe.MatchString(l.ID) {
		return bad("lease.id", "1 to 128 letters, digits, '-' or '_'", l.ID)
	}
	if l.ActiveThreadPct < 1 || l.ActiveThreadPct > 100 {
		return bad("lease.active_thread_pct", "a percentage in [1, 100]", l.ActiveThreadPct)
	}
	for k, v := range l.Env {
		if !envKeyRe.MatchString(k) || !slices.Contains(sidecarEnv, k) {
			return bad("lease.env", "only "+strings.Join(sidecarEnv, ", "), k)
		}
		// Quoted, a newline would still be safe to eval, but it would split
		// one export over two lines for whatever reads the output by line.
		if len(v) > 4096 || strings.ContainsFunc(v, termtext.LineBreaking) {
			return bad("lease.env."+k, "a value of at most 4096 bytes without control characters", v)
		}
		if k == v1.EnvLeaseID && v != l.ID {
			return bad("lease.env."+k, "the lease's id", v)
		}
		if k == v1.EnvVisibleDevices && !migRe.MatchString(v) {
			return bad("lease.env."+k, "a MIG device's UUID (MIG- and 8-4-4-4-12 lower-case hex digits)", v)
		}
	}
	if in := l.Instance; in != nil {
		switch {
		case !migRe.MatchString(in.UUID):
			return bad("lease.instance.uuid", "a MIG device's UUID (MIG- and 8-4-4-4-12 lower-case hex digits)", in.UUID)
		case l.Env[v1.EnvVisibleDevices] != in.UUID:
			return bad("lease.env."+v1.EnvVisibleDevices, "the lent instance's UUID ("+in.UUID+")", l.Env[v1.EnvVisibleDevices])
		case l.Env[v1.EnvPipeDirectory] != "":
			return bad("lease.env."+v1.EnvPipeDirectory, "none on a lent instance (no MPS daemon serves it)", l.Env[v1.EnvPipeDirectory])
		}
	}
	return nil
}

// WriteEnv writes a checked decision as shell lines a launcher can eval
// (colocd admit, colocd place): comments, then one `export KEY='value'` per
// variable, sorted: the lease's environment and ep's connection, so that
// the launcher commands that follow find both. token is the lease's
// secret, which the launcher drew itself. A deny is an error wrapping
// ErrDenied, after its comments.
func WriteEnv(w io.Writer, d *v1.Decision, ep *Endpoint, token string) error {
	if err := CheckDecision(d, ep.Sidecar); err != nil {
		return err
	}
	fmt.Fprintf(w, "# %s (%s): %s\n", d.Decision, d.Reason.Code, termtext.Line(d.Reason.Message))
	for _, p := range d.Predictions {
		upper := ""
		if p.PredictedP99UpperMS > p.PredictedP99MS {
			upper = fmt.Sprintf(" (up to %.2f ms)", p.PredictedP99UpperMS)
		}
		what := "p99"
		if p.SLOMetric == "step" {
			what = "step p99"
		}
		fmt.Fprintf(w, "# %s: predicted %s %.2f ms%s, SLO %.2f ms, solo %.2f ms\n", termtext.Line(p.Service), what, p.PredictedP99MS, upper, p.SLOP99MS, p.SoloP99MS)
	}
	if d.Decision == v1.DecisionDeny {
		return fmt.Errorf("%w (%s): %s", ErrDenied, d.Reason.Code, termtext.Line(d.Reason.Message))
	}
	l := d.Lease
	if in := l.Instance; in != nil {
		fmt.Fprintf(w, "# lease %s for job %s holds MIG instance %s (%s, %d SMs, %d MiB) whole until %s\n", l.ID, termtext.Line(l.JobID),
			termtext.Line(in.Profile), in.UUID, in.SMs, in.MemoryMiB, l.ExpiresAt.Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "# lease %s for job %s at %d %% until %s\n", l.ID, termtext.Line(l.JobID), l.ActiveThreadPct, l.ExpiresAt.Format(time.RFC3339))
	}
	env := map[string]string{EnvLease: l.ID, EnvToken: token, EnvSidecar: ep.Sidecar, EnvServer: ep.Server}
	if ep.NKey != "" {
		env[EnvNKey] = ep.NKey
	}
	if ep.Creds != "" {
		env[EnvCreds] = ep.Creds
	}
	for k, v := range map[string]string{EnvTLSCA: ep.TLSCA, EnvTLSCert: ep.TLSCert, EnvTLSKey: ep.TLSKey} {
		if v != "" {
			env[k] = v
		}
	}
	for k, v := range l.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// The launcher's own values (token, server, paths) are checked as the
	// reply's are: one export per line, whatever a flag or a file held.
	for _, k := range keys {
		if strings.ContainsFunc(env[k], termtext.LineBreaking) {
			return fmt.Errorf("admit: %s: want a value without control characters, got %q", k, termtext.Clip(env[k]))
		}
	}
	for _, k := range keys {
		fmt.Fprintf(w, "export %s=%s\n", k, termtext.ShellQuote(env[k]))
	}
	return nil
}
