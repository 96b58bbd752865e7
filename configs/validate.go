package configs

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/mps"
	"github.com/colocd/colocd/observe"
	"github.com/colocd/colocd/predictor"
)

// invalid is the *field.List of problems.
func invalid(problems []*field.Error) error {
	return &field.List{Doc: "configuration", Errors: problems}
}

// Limits of the keys without a natural bound.
const (
	// MinEventBudget is the least predictor.max_events: below it a real
	// training profile next to a sparse service would be refused.
	MinEventBudget = 10_000_000
	// MaxRequests bounds predictor.requests: a prediction's cost grows
	// with it, and a decision must stay fast.
	MaxRequests = 1_000_000
	// MaxFileBytes bounds a file the configuration names (a profile, a
	// calibration, a credentials file): far above any real one.
	MaxFileBytes = 256 << 20
	// maxQuoted bounds how much of a bad value a problem repeats.
	maxQuoted = 80
)

var (
	// sidecarID: the id is one token of a NATS subject.
	sidecarID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	// serviceName: a name is a metric label value and a log field.
	serviceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	// publicUserNKey: "U" and 55 characters of base32 (RFC 4648, no padding).
	publicUserNKey = regexp.MustCompile(`^U[A-Z2-7]{55}$`)
)

// checker collects problems.
type checker struct{ problems []*field.Error }

// nested adds the problems of an adapter's own check, which name their keys.
func (c *checker) nested(err error) {
	var l *field.List
	if errors.As(err, &l) {
		c.problems = append(c.problems, l.Errors...)
		return
	}
	c.add("", "a valid configuration", err.Error())
}

func (c *checker) add(key, want, got string) {
	c.problems = append(c.problems, &field.Error{Path: key, Want: want, Got: got})
}

// oneOf checks an enumerated string.
func (c *checker) oneOf(key, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	c.add(key, "one of "+strings.Join(allowed, ", "), quote(v))
}

// intIn checks lo ≤ v ≤ hi.
func (c *checker) intIn(key string, v, lo, hi int, want string) {
	if v < lo || v > hi {
		c.add(key, want, strconv.Itoa(v))
	}
}

// file checks that a set path names a regular file, and reports whether
// it does. A device or a pipe is refused before anything reads it.
func (c *checker) file(key, path, what string) bool {
	if path == "" {
		return false
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		c.add(key, "an existing "+what, fmt.Sprintf("%s (%v)", quote(path), errors.Unwrap(err)))
		return false
	case !st.Mode().IsRegular():
		c.add(key, "an existing "+what, quote(path)+" (not a regular file)")
		return false
	case st.Size() > MaxFileBytes:
		c.add(key, fmt.Sprintf("a %s of at most %d MiB", what, MaxFileBytes>>20), fmt.Sprintf("%s (%d bytes)", quote(path), st.Size()))
		return false
	}
	return true
}

// hostPort checks a listen address host:port with a port in 0..65535
// (0: any free port, for tests and several sidecars on one host).
func (c *checker) hostPort(key, v string) {
	host, port, err := net.SplitHostPort(v)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
		c.add(key, `host:port with a port from 0 (any free port) to 65535, e.g. "127.0.0.1:4222"`, quote(v))
	}
}

// Validate checks every key and returns all problems at once in a
// *field.List, each naming its key path and the allowed values. It
// reads the files the configuration names: each service's profile (a valid
// colocd.profile/v1 of kind inference), the calibration, the NATS
// credentials and TLS files.
func (c *Config) Validate() error {
	var ck checker
	c.checkSidecar(&ck)
	c.checkNATS(&ck)
	c.checkGPU(&ck)
	ck.oneOf("sharing.mode", c.Sharing.Mode, ModeMPS, ModeTimeslice)
	c.checkMPS(&ck)
	c.checkPredictor(&ck)
	c.checkServices(&ck)
	c.checkAdmission(&ck)
	c.checkFleet(&ck)
	ck.hostPort("telemetry.http", c.Telemetry.HTTP)
	ck.oneOf("telemetry.tracing", c.Telemetry.Tracing, TracingNone, TracingConsole, TracingOTLP)
	if len(ck.problems) > 0 {
		c.lines.annotate(ck.problems)
		return invalid(ck.problems)
	}
	return nil
}

func (c *Config) checkSidecar(ck *checker) {
	if c.Sidecar.ID != "" && !sidecarID.MatchString(c.Sidecar.ID) {
		ck.add("sidecar.id", `"" (the GPU UUID) or 1 to 128 letters, digits, "-" or "_" (one NATS subject token)`, quote(c.Sidecar.ID))
	}
	if c.Sidecar.DataDir == "" {
		ck.add("sidecar.data_dir", "a directory path", `""`)
	}
	if !validNode(c.Sidecar.Node) {
		ck.add("sidecar.node", `"" (the host name) or up to 253 printable characters`, quote(c.Sidecar.Node))
	}
}

func (c *Config) checkNATS(ck *checker) {
	n := c.NATS
	if n.URL != "" {
		for u := range strings.SplitSeq(n.URL, ",") {
			p, err := url.Parse(strings.TrimSpace(u))
			if err != nil || p.Host == "" || (p.Scheme != "nats" && p.Scheme != "tls" && p.Scheme != "ws" && p.Scheme != "wss") {
				ck.add("nats.url", `"" (embedded server) or comma-separated nats://, tls://, ws:// or wss:// URLs with a host`, quote(n.URL))
				break
			}
		}
	}
	ck.hostPort("nats.listen", n.Listen)
	switch {
	case n.Replicas < 0 || n.Replicas > 5:
		ck.add("nats.replicas", "0 (3 on a cluster of three or more servers, else 1) or 1 to 5 (a JetStream cluster's servers that keep each bucket and stream)", strconv.Itoa(n.Replicas))
	case n.Replicas > 1 && n.URL == "":
		ck.add("nats.replicas", "1 with the embedded server (nats.url \"\"), which is one server", strconv.Itoa(n.Replicas))
	}
	ck.clientFiles("nats.", n.Credentials, n.NKey, n.TLS)
	ck.file("nats.server_tls.cert", n.ServerTLS.Cert, "PEM file")
	ck.file("nats.server_tls.key", n.ServerTLS.Key, "PEM file")
	ck.file("nats.server_tls.client_ca", n.ServerTLS.ClientCA, "PEM file")
	if (n.ServerTLS.Cert == "") != (n.ServerTLS.Key == "") {
		ck.add("nats.server_tls.key", "set together with nats.server_tls.cert (the listener's certificate and key)", quote(n.ServerTLS.Key))
	}
	if n.ServerTLS.ClientCA != "" && n.ServerTLS.Cert == "" {
		ck.add("nats.server_tls.cert", "the listener's certificate, since nats.server_tls.client_ca asks for mutual TLS", `""`)
	}
	for i, k := range n.Launchers.NKeys {
		if !publicUserNKey.MatchString(k) {
			ck.add(fmt.Sprintf("nats.launchers.nkeys[%d]", i), `a public user NKey: "U" and 55 base32 characters (nsc or nk -gen user prints one)`, quote(k))
		}
	}
	if n.Launchers.MaxConnections < 0 || n.Launchers.MaxConnections > bus.MaxLimit {
		ck.add("nats.launchers.max_connections", fmt.Sprintf("0 (256) or a count from 1 to %d", bus.MaxLimit), strconv.Itoa(n.Launchers.MaxConnections))
	}
	if err := n.Limits.Validate("nats.limits."); err != nil {
		ck.nested(err)
	}
	if err := n.FrontDoor.Validate("nats.front_door."); err != nil {
		ck.nested(err)
	}
	c.checkLeaf(ck)
}

// clientFiles checks a NATS client's login and TLS files, under prefix
// ("nats." or "nats.leaf."): credentials or an NKey seed, not both, each an
// existing file, and a certificate with its key.
func (ck *checker) clientFiles(prefix, creds, nkey string, t bus.TLSFiles) {
	if creds != "" && nkey != "" {
		ck.add(prefix+"nkey", "unset when "+prefix+"credentials is set (one authentication method)", quote(nkey))
	}
	ck.file(prefix+"credentials", creds, "credentials file")
	ck.file(prefix+"nkey", nkey, "NKey seed file")
	ck.file(prefix+"tls.ca", t.CA, "PEM file")
	ck.file(prefix+"tls.cert", t.Cert, "PEM file")
	ck.file(prefix+"tls.key", t.Key, "PEM file")
	if t.Cert != "" && t.Key == "" {
		ck.add(prefix+"tls.key", "the client key file, since "+prefix+"tls.cert is set", `""`)
	}
	if t.Key != "" && t.Cert == "" {
		ck.add(prefix+"tls.cert", "the client certificate file, since "+prefix+"tls.key is set", `""`)
	}
}

// checkLeaf checks nats.leaf: only with the embedded server, the hub's
// leafnode URLs, one way to log in, and a hub domain other than the
// sidecar's own.
func (c *Config) checkLeaf(ck *checker) {
	l := c.NATS.Leaf
	if !sidecarID.MatchString(l.HubDomain) {
		ck.add("nats.leaf.hub_domain", `the hub's JetStream domain: 1 to 128 letters, digits, "-" or "_"`, quote(l.HubDomain))
	} else if l.URL != "" && l.HubDomain == c.Sidecar.ID {
		ck.add("nats.leaf.hub_domain", "a domain other than sidecar.id, which is the leaf's own JetStream domain", quote(l.HubDomain))
	}
	if l.HubReplicas < 1 || l.HubReplicas > 5 {
		ck.add("nats.leaf.hub_replicas", "1 to 5 (the hub's servers that keep the fleet's bucket; 3 on a 3-node hub)", strconv.Itoa(l.HubReplicas))
	}
	if l.URL == "" {
		return
	}
	if c.NATS.URL != "" {
		ck.add("nats.leaf.url", `"" when nats.url is set: only the embedded server joins a hub as a leaf node`, quote(l.URL))
	}
	for u := range strings.SplitSeq(l.URL, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || p.Host == "" || p.User != nil || (p.Scheme != "nats-leaf" && p.Scheme != "nats" && p.Scheme != "tls") {
			ck.add("nats.leaf.url", "comma-separated nats-leaf:// or tls:// URLs of the hub's leafnode port, with a host and no user", quote(l.URL))
			break
		}
	}
	if l.NKey == "" && l.Credentials == "" {
		ck.add("nats.leaf.nkey", "the seed file of the hub's sidecar user (or nats.leaf.credentials)", `""`)
	}
	ck.clientFiles("nats.leaf.", l.Credentials, l.NKey, l.TLS)
}

// checkGPU is package gpu's own check of its section: the limits live there.
func (c *Config) checkGPU(ck *checker) {
	if err := c.GPU.Validate(); err != nil {
		ck.nested(err)
	}
}

// checkMPS is package mps's own check of its section, and the one rule
// that needs the gpu section too.
func (c *Config) checkMPS(ck *checker) {
	if err := c.MPS.Validate(); err != nil {
		ck.nested(err)
	}
	// One MPS daemon per MIG device, each on its own pipe directory: the
	// shared default would put the sidecars of a GPU's MIG devices on one
	// daemon, without an error.
	pipe := c.MPS.PipeDir
	if sel, err := gpu.ParseSelector(c.GPU.Device); err == nil && sel.IsMIG() && c.Sharing.Mode == ModeMPS && pipe == mps.DefaultSettings().PipeDir {
		ck.add("mps.pipe_dir", "a directory of this MIG device's own MPS daemon (each MIG device has one; not the default "+quote(pipe)+")", quote(pipe))
	}
}

func (c *Config) checkPredictor(ck *checker) {
	p := c.Predictor
	if p.Calibration != "" && ck.file("predictor.calibration", p.Calibration, "colocd.calibration/v1 file") {
		if _, err := predictor.LoadCalibration(p.Calibration); err != nil {
			ck.add("predictor.calibration", `"" (the preset for the device) or a valid colocd.calibration/v1 file`, clip(err.Error()))
		}
	}
	ck.intIn("predictor.requests", p.Requests, 1, MaxRequests, fmt.Sprintf("a count from 1 to %d", MaxRequests))
	if p.MaxEvents != 0 && (p.MaxEvents < MinEventBudget || p.MaxEvents > predictor.MaxEvents) {
		ck.add("predictor.max_events", fmt.Sprintf("0 (%d) or a count of events from %d to %d (the simulation's own cap)", predictor.MaxEvents, MinEventBudget, predictor.MaxEvents), strconv.Itoa(p.MaxEvents))
	}
	if c := p.Confidence; c != 0 && !(c >= 0.5 && c < 1) {
		ck.add("predictor.confidence", "a level in [0.5, 1), or 0 to hold the point estimate", fmt.Sprintf("%g", c))
	}
}

func (c *Config) checkServices(ck *checker) {
	if len(c.Services) == 0 {
		ck.add("services", "at least one inference service", "none")
	}
	seen := map[string]int{}
	for i, s := range c.Services {
		at := fmt.Sprintf("services[%d]", i)
		switch j, dup := seen[s.Name]; {
		case !serviceName.MatchString(s.Name):
			ck.add(at+".name", `1 to 63 letters, digits, ".", "-" or "_", starting with a letter or digit`, quote(s.Name))
		case dup:
			ck.add(at+".name", fmt.Sprintf("a name unique among services (services[%d] has it)", j), quote(s.Name))
		default:
			seen[s.Name] = i
		}
		if s.Profile == "" {
			ck.add(at+".profile", "a colocd.profile/v1 file of kind inference", `""`)
		} else if !ck.file(at+".profile", s.Profile, "colocd.profile/v1 file") {
			// reported
		} else if prof, err := predictor.LoadProfile(s.Profile); err != nil {
			ck.add(at+".profile", "a valid colocd.profile/v1 file of kind inference", clip(err.Error()))
		} else if prof.Kind != predictor.KindInference {
			ck.add(at+".profile", "a profile of kind inference", fmt.Sprintf("%s of kind %q", quote(s.Profile), prof.Kind))
		}
		if s.IsEngine() {
			checkEngine(ck, at, &s, c.Predictor.Requests)
		} else {
			// The predictor's own range: a rate outside it would make every
			// admit a 503 while the sidecar looks ready.
			if !(s.RateRPS >= predictor.MinRateRPS && s.RateRPS <= predictor.MaxRateRPS) {
				ck.add(at+".rate_rps", "a request rate in "+predictor.RateRange, fmtFloat(s.RateRPS))
			}
			if !(s.SLO.P99MS > 0) || math.IsInf(s.SLO.P99MS, 0) {
				ck.add(at+".slo.p99_ms", "a latency above 0 (ms)", fmtFloat(s.SLO.P99MS))
			}
			if s.SLO.StepP99MS != 0 {
				ck.add(at+".slo.step_p99_ms", "0: only an engine (engine.busy set) has steps", fmtFloat(s.SLO.StepP99MS))
			}
		}
		if s.Metrics.Set() {
			if err := s.Metrics.Validate(at + ".metrics"); err != nil {
				ck.nested(err)
			} else if s.IsEngine() && !slices.Contains(observe.StepPresets(), s.Metrics.Preset) {
				ck.add(at+".metrics.preset", fmt.Sprintf("for an engine, a preset that counts its steps: one of %v", observe.StepPresets()), quote(s.Metrics.Preset))
			}
		}
	}
}

// checkEngine checks an engine service: its busy fraction and burst, and an
// SLO on steps, not requests (whose lengths the step model does not know).
func checkEngine(ck *checker, at string, s *Service, requests int) {
	if !(s.Engine.Busy > 0 && s.Engine.Busy < 1) {
		ck.add(at+".engine.busy", "the fraction of time the engine has work, in (0, 1)", fmtFloat(s.Engine.Busy))
	}
	if b := s.Engine.BurstSteps; b != 0 && !(b >= 1 && b <= predictor.MaxBurstSteps) {
		ck.add(at+".engine.burst_steps", "a mean busy period in steps, in [1, 100000] (0: 128)", fmtFloat(b))
	} else if b := s.Bursts(); requests > 0 && b > float64(requests)/predictor.MinBursts {
		ck.add(at+".engine.burst_steps", fmt.Sprintf("at most predictor.requests / %d (%d simulated steps: about ten busy periods)", predictor.MinBursts, requests), fmtFloat(b))
	}
	if s.RateRPS != 0 {
		ck.add(at+".rate_rps", "0 for an engine (engine.busy is its load)", fmtFloat(s.RateRPS))
	}
	if s.SLO.P99MS != 0 {
		ck.add(at+".slo.p99_ms", "0 for an engine: its SLO is on steps (slo.step_p99_ms)", fmtFloat(s.SLO.P99MS))
	}
	if !(s.SLO.StepP99MS > 0) || math.IsInf(s.SLO.StepP99MS, 0) {
		ck.add(at+".slo.step_p99_ms", "a step latency above 0 (ms)", fmtFloat(s.SLO.StepP99MS))
	}
}

// checkAdmission is package admission's own check of its section.
func (c *Config) checkAdmission(ck *checker) {
	if err := c.Admission.Validate(); err != nil {
		ck.nested(err)
	}
}

func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "…"
	}
	return strconv.Quote(s)
}

// clip shortens an error message repeated in a problem.
func clip(s string) string {
	if len(s) <= 4*maxQuoted {
		return s
	}
	cut := 4 * maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (c *Config) checkFleet(ck *checker) {
	f := c.Fleet
	if f.Heartbeat < time.Second || f.Heartbeat > 10*time.Minute {
		ck.add("fleet.heartbeat", "a duration from 1s to 10m", f.Heartbeat.String())
	}
	if f.TTL < 2*f.Heartbeat || f.TTL > 24*time.Hour {
		ck.add("fleet.ttl", fmt.Sprintf("a duration from twice fleet.heartbeat (%s) to 24h", 2*f.Heartbeat), f.TTL.String())
	}
}

// validNode reports whether s may name a node: at most 253 printable
// ASCII characters (a Kubernetes node name is at most 253).
func validNode(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}
