package configs

import (
	"path/filepath"
	"time"

	"github.com/colocd/colocd/natsserver"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/internal/frontdoor"
	"github.com/colocd/colocd/mps"
	"github.com/colocd/colocd/observe"
)

// Config is colocd's whole configuration, one YAML file. The mapstructure
// tags are the YAML keys; every key has a default (Default) and an
// environment override COLOCD_<SECTION>_<KEY> (see Load). Only Services and
// Admission change while colocd runs (see Watcher); the other sections are
// read once at startup. Reference: docs/configuration.md.
type Config struct {
	Sidecar   Sidecar            `mapstructure:"sidecar"`
	NATS      NATS               `mapstructure:"nats"`
	GPU       gpu.Config         `mapstructure:"gpu"`
	Sharing   Sharing            `mapstructure:"sharing"`
	MPS       mps.Settings       `mapstructure:"mps"`
	Predictor Predictor          `mapstructure:"predictor"`
	Services  []Service          `mapstructure:"services"`
	Admission admission.Settings `mapstructure:"admission"`
	Fleet     Fleet              `mapstructure:"fleet"`
	Telemetry Telemetry          `mapstructure:"telemetry"`

	// lines: where each key stood in the file Load read, so that Validate's
	// problems name their line.
	lines keyLines
}

// Sidecar identifies this colocd instance and says where it keeps state.
type Sidecar struct {
	// ID names the sidecar in NATS subjects (colocd.v1.<id>.admit); "" is
	// the GPU's UUID.
	ID string `mapstructure:"id"`
	// DataDir holds the embedded NATS server's JetStream store and other
	// state that survives a restart.
	DataDir string `mapstructure:"data_dir"`
	// Node names the machine in the sidecar's capacity summary, so that a
	// launcher can place a job on its own node (colocd run --place --node);
	// "" is the host name. In Kubernetes, the pod's spec.nodeName.
	Node string `mapstructure:"node"`
}

// NATS says how colocd reaches NATS: a remote server or cluster at URL, or,
// when URL is empty, an embedded server listening on Listen.
type NATS struct {
	// URL is a comma-separated list of server URLs; "" starts the
	// embedded server.
	URL string `mapstructure:"url"`
	// Listen is the embedded server's client address (host:port).
	Listen string `mapstructure:"listen"`
	// Credentials is a NATS credentials file (JWT and seed).
	Credentials string `mapstructure:"credentials"`
	// NKey is an NKey seed file.
	NKey string `mapstructure:"nkey"`
	// TLS holds the files of a TLS connection to a remote server.
	TLS bus.TLSFiles `mapstructure:"tls"`
	// Launchers says who may connect to the embedded server (URL "").
	Launchers Launchers `mapstructure:"launchers"`
	// ServerTLS makes the embedded server's listener speak TLS.
	ServerTLS natsserver.ServerTLSFiles `mapstructure:"server_tls"`
	// Replicas is how many servers of a JetStream cluster keep each of the
	// sidecar's buckets and streams (leases, events, profiles, the fleet's
	// capacity summaries); 1 with the embedded server. 0 (the default)
	// chooses: 3 on a cluster of three or more servers, else 1.
	Replicas int `mapstructure:"replicas"`
	// Leaf makes the embedded server a leaf node of a hub cluster
	// (docs/fleet.md#leaf-nodes).
	Leaf Leaf `mapstructure:"leaf"`
	// Limits bound each launcher identity's share of the sidecar (package
	// bus owns them: docs/security.md#containment).
	Limits bus.Limits `mapstructure:"limits"`
	// FrontDoor bounds the embedded listener's connections, in all and
	// before they authenticate (docs/security.md#before-authentication).
	FrontDoor frontdoor.Config `mapstructure:"front_door"`
}

// Leaf connects the embedded server to a hub cluster as a leaf node: the
// hub's launchers reach this sidecar, its capacity summary goes to the
// hub's fleet bucket, and its leases and events stay on this host, in the
// JetStream domain named by the sidecar id.
type Leaf struct {
	// URL is a comma-separated list of the hub's leafnode listeners
	// (nats-leaf://host:7422, tls:// for TLS); "" means no leaf connection.
	URL string `mapstructure:"url"`
	// NKey is the seed file of the hub's sidecar user.
	NKey string `mapstructure:"nkey"`
	// Credentials is a NATS credentials file instead of NKey.
	Credentials string `mapstructure:"credentials"`
	// TLS holds the CA that signs the hub's certificate and, for mutual
	// TLS, this host's certificate and key.
	TLS bus.TLSFiles `mapstructure:"tls"`
	// HubDomain is the hub's JetStream domain, where the fleet's capacity
	// summaries live.
	HubDomain string `mapstructure:"hub_domain"`
	// HubReplicas is how many of the hub's servers keep the fleet's bucket
	// when this host is the one that creates it.
	HubReplicas int `mapstructure:"hub_replicas"`
}

// Launchers are the identities the embedded NATS server lets in from
// outside the process. Each may only use the launcher's side of the API
// (docs/security.md); nobody connects anonymously.
type Launchers struct {
	// NKeyFile holds the launchers' NKey seed; "" means
	// <data_dir>/launcher.nk, created (mode 0600) at the first start.
	NKeyFile string `mapstructure:"nkey_file"`
	// NKeys are more launchers' public user NKeys ("U…"), for teams that
	// keep their own seed.
	NKeys []string `mapstructure:"nkeys"`
	// Dir holds one public key per launcher identity, NAME.pub, as
	// `colocd launcher add NAME` writes them; "" means
	// <data_dir>/launchers. The sidecar reads it again while it runs.
	Dir string `mapstructure:"dir"`
	// MaxConnections bounds one identity's connections at a time (0:
	// 256).
	MaxConnections int `mapstructure:"max_connections"`
}

// LauncherDir is the directory of the launcher identities' public keys.
func (c *Config) LauncherDir() string {
	if c.NATS.Launchers.Dir != "" {
		return c.NATS.Launchers.Dir
	}
	return filepath.Join(c.Sidecar.DataDir, "launchers")
}

// LauncherNKeyFile is the path of the launchers' seed file.
func (c *Config) LauncherNKeyFile() string {
	if c.NATS.Launchers.NKeyFile != "" {
		return c.NATS.Launchers.NKeyFile
	}
	return filepath.Join(c.Sidecar.DataDir, "launcher.nk")
}

// Sharing says how training shares the GPU with inference.
type Sharing struct {
	// Mode is mps (concurrent, each job capped by its active-thread
	// percentage: grant, throttle or deny) or timeslice (the driver's
	// round-robin: grant or deny).
	Mode string `mapstructure:"mode"`
}

// Predictor configures the latency predictions admission decides on.
type Predictor struct {
	// Calibration is a colocd.calibration/v1 file, merged over the preset
	// for the device, else the built-in default (predictor.ResolveCalibration).
	Calibration string `mapstructure:"calibration"`
	// Requests is the number of simulated requests per prediction.
	Requests int `mapstructure:"requests"`
	// Seed seeds the simulated arrivals, so that a decision can be
	// reproduced with colocd predict.
	Seed uint64 `mapstructure:"seed"`
	// Confidence is the level of the upper bound admission holds to each
	// SLO: the p99 the simulated requests (and the calibration's parameter
	// intervals) make likely at this level. 0 holds the point estimate.
	Confidence float64 `mapstructure:"confidence"`
	// MaxEvents is each prediction's work budget, in kernel events
	// estimated before simulating: a training profile whose prediction is
	// estimated above it is refused with a 400 naming the profile, before
	// any simulation. 0 means predictor.MaxEvents (200 million).
	MaxEvents int `mapstructure:"max_events"`
}

// Service is one inference service on this GPU, whose SLO admission
// protects.
type Service struct {
	// Name names the service in decisions, metrics and logs.
	Name string `mapstructure:"name"`
	// Profile is the service's colocd.profile/v1 file, of kind inference.
	Profile string `mapstructure:"profile"`
	// RateRPS is the request rate the SLO must hold at (0 for an engine,
	// whose load is Engine.Busy).
	RateRPS float64 `mapstructure:"rate_rps"`
	// Engine, when Busy is set, makes the service an LLM engine that
	// batches continuously (vLLM, SGLang, TGI): its profile is one engine
	// step and its SLO is on the step latency.
	Engine Engine `mapstructure:"engine"`
	// SLO is the latency objective.
	SLO SLO `mapstructure:"slo"`
	// Metrics, when set, is where the service's server exports its own
	// metrics: a decision then predicts at the observed rate when it is
	// above RateRPS, and status shows what the server observes.
	Metrics observe.Endpoint `mapstructure:"metrics"`
}

// Engine describes an LLM engine's load: steps come in bursts that run
// back to back while the engine has requests (docs/predictor.md#engines).
type Engine struct {
	// Busy is the fraction of time the engine has work, in (0, 1): the
	// load its SLO must hold at. The guard raises it to what the server's
	// step counter shows, when that is higher.
	Busy float64 `mapstructure:"busy"`
	// BurstSteps is the mean number of steps in one busy period (0:
	// DefaultBurstSteps).
	BurstSteps float64 `mapstructure:"burst_steps"`
}

// DefaultBurstSteps is an engine's mean busy period, in steps: about one
// chat reply's output tokens.
const DefaultBurstSteps = 128

// IsEngine reports whether the service is an LLM engine.
func (s *Service) IsEngine() bool { return s.Engine.Busy != 0 || s.Engine.BurstSteps != 0 }

// Bursts is the engine's mean burst in steps (0 for a request service).
func (s *Service) Bursts() float64 {
	switch {
	case !s.IsEngine():
		return 0
	case s.Engine.BurstSteps == 0:
		return DefaultBurstSteps
	}
	return s.Engine.BurstSteps
}

// SLO is a service's latency objective: on latency_ms (arrival to
// completion) at the service's rate, the figure colocd predict prints, or,
// for an engine, on the step latency (its service_ms) at its busy fraction.
type SLO struct {
	// P99MS is the 99th percentile latency bound in milliseconds (request
	// services).
	P99MS float64 `mapstructure:"p99_ms"`
	// StepP99MS is the 99th percentile step latency bound in milliseconds
	// (engines): the inter-token latency (TPOT) of the requests in a step.
	StepP99MS float64 `mapstructure:"step_p99_ms"`
}

// Fleet configures the capacity summary the sidecar keeps in the fleet's
// KV bucket (docs/fleet.md).
type Fleet struct {
	// Heartbeat is how often the summary is rewritten when nothing
	// changed; a change rewrites it at once.
	Heartbeat time.Duration `mapstructure:"heartbeat"`
	// TTL is the bucket's maximum age, set by the sidecar that creates it:
	// a summary not rewritten within it is gone.
	TTL time.Duration `mapstructure:"ttl"`
	// TypicalProfile is the training profile whose quote gives the
	// summary's typical_pct; "" is the built-in typical trainer.
	TypicalProfile string `mapstructure:"typical_profile"`
}

// Telemetry configures the HTTP endpoints and tracing.
type Telemetry struct {
	// HTTP is the address of /healthz, /readyz and /metrics.
	HTTP string `mapstructure:"http"`
	// Tracing is the span exporter: none, console (stdout) or otlp
	// (configured by the standard OTEL_EXPORTER_OTLP_* variables).
	Tracing string `mapstructure:"tracing"`
}

// Allowed values of the enumerated keys.
const (
	BackendAuto = gpu.BackendAuto
	BackendNVML = gpu.BackendNVML
	BackendSim  = gpu.BackendSim

	ModeMPS       = "mps"
	ModeTimeslice = "timeslice"

	TracingNone    = "none"
	TracingConsole = "console"
	TracingOTLP    = "otlp"
)

// Default returns the configuration colocd starts from before the file, the
// environment and flags apply. It has no services, so it does not validate
// on its own.
func Default() Config {
	return Config{
		Sidecar:   Sidecar{DataDir: "/var/lib/colocd"},
		NATS:      NATS{Listen: "127.0.0.1:4222", Replicas: 0, Leaf: Leaf{HubDomain: "hub", HubReplicas: 1}},
		GPU:       gpu.Default(),
		Sharing:   Sharing{Mode: ModeMPS},
		MPS:       mps.DefaultSettings(),
		Predictor: Predictor{Requests: 2000, Seed: 1, Confidence: 0.95},
		Admission: admission.DefaultSettings(),
		Fleet:     Fleet{Heartbeat: 10 * time.Second, TTL: 30 * time.Second},
		Telemetry: Telemetry{HTTP: "127.0.0.1:9464", Tracing: TracingNone},
	}
}
