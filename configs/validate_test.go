package configs

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/observe"
)

func TestValidateValid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pem := writeFile(t, filepath.Join(dir, "x.pem"), "pem")
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"defaults with a service", func(*Config) {}},
		{"remote NATS cluster with mutual TLS", func(c *Config) {
			c.NATS.URL = "tls://a.example:4222, tls://b.example:4222"
			c.NATS.TLS = bus.TLSFiles{CA: pem, Cert: pem, Key: pem}
			c.NATS.Credentials = pem
		}},
		{"embedded server as a leaf of a hub, over mutual TLS", func(c *Config) {
			c.NATS.Leaf = Leaf{URL: "tls://hub-1:7422, nats-leaf://hub-2:7422", NKey: pem, TLS: bus.TLSFiles{CA: pem, Cert: pem, Key: pem}, HubDomain: "fleet-hub", HubReplicas: 3}
		}},
		{"GPU by UUID, nvml, no sim name needed", func(c *Config) {
			c.GPU.Backend, c.GPU.Device, c.GPU.Sim.Name = BackendNVML, "GPU-5e2c9f1a-0b1c-4d2e-8f3a-9b8c7d6e5f40", ""
		}},
		{"timeslice, sidecar id, calibration preset file", func(c *Config) {
			c.Sharing.Mode = ModeTimeslice
			c.Sidecar.ID = "gpu-node-1_0"
			c.Predictor.Calibration = absPath(t, "../predictor/presets/h200.json")
		}},
		{"an LLM engine with a step SLO, observed by vllm", func(c *Config) {
			c.Services[0].RateRPS, c.Services[0].SLO = 0, SLO{StepP99MS: 40}
			c.Services[0].Engine = Engine{Busy: 0.6}
			c.Services[0].Metrics = observe.Endpoint{URL: "http://127.0.0.1:8000/metrics", Preset: "vllm"}
		}},
		{"bounds", func(c *Config) {
			c.Admission.Headroom, c.Admission.PctStep, c.Admission.Lease.Default = 0, 100, time.Hour
			c.MPS.DefaultActiveThreadPct, c.MPS.ClientPriority = 1, 1
			c.Telemetry.HTTP, c.Telemetry.Tracing = ":9464", TracingOTLP
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.mutate(c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestValidateEachProblem breaks one key at a time from a valid
// configuration: exactly that key is reported, with what it takes.
func TestValidateEachProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pem := writeFile(t, filepath.Join(dir, "x.pem"), "pem")
	badCal := writeFile(t, filepath.Join(dir, "cal.json"), `{"format": "colocd.calibration/v1", "timeslice": {"slice_us": -1}}`)
	notProfile := writeFile(t, filepath.Join(dir, "p.json"), `{"format": "nope"}`)
	tests := []struct {
		name   string
		mutate func(*Config)
		key    string
		want   string // in the problem's Want
	}{
		{"sidecar id with a dot", func(c *Config) { c.Sidecar.ID = "gpu.0" }, "sidecar.id", "NATS subject token"},
		{"sidecar data_dir empty", func(c *Config) { c.Sidecar.DataDir = "" }, "sidecar.data_dir", "directory"},
		{"nats url scheme", func(c *Config) { c.NATS.URL = "http://x:4222" }, "nats.url", "nats://"},
		{"nats url without host", func(c *Config) { c.NATS.URL = "nats://" }, "nats.url", "with a host"},
		{"nats listen without port", func(c *Config) { c.NATS.Listen = "127.0.0.1" }, "nats.listen", "host:port"},
		{"nats listen port range", func(c *Config) { c.NATS.Listen = "127.0.0.1:70000" }, "nats.listen", "0 (any free port) to 65535"},
		{"nats credentials and nkey", func(c *Config) { c.NATS.Credentials, c.NATS.NKey = pem, pem }, "nats.nkey", "unset"},
		{"leaf with a remote server", func(c *Config) {
			c.NATS.URL, c.NATS.Leaf = "nats://x:4222", Leaf{URL: "nats-leaf://hub:7422", NKey: pem, HubDomain: "hub", HubReplicas: 1}
		}, "nats.leaf.url", "only the embedded server"},
		{"leaf url scheme", func(c *Config) { c.NATS.Leaf.URL, c.NATS.Leaf.NKey = "http://hub:7422", pem }, "nats.leaf.url", "nats-leaf://"},
		{"leaf url with a password", func(c *Config) { c.NATS.Leaf.URL, c.NATS.Leaf.NKey = "nats-leaf://a:b@hub:7422", pem }, "nats.leaf.url", "no user"},
		{"leaf without a login", func(c *Config) { c.NATS.Leaf.URL = "nats-leaf://hub:7422" }, "nats.leaf.nkey", "seed file"},
		{"leaf nkey and credentials", func(c *Config) {
			c.NATS.Leaf = Leaf{URL: "nats-leaf://hub:7422", NKey: pem, Credentials: pem, HubDomain: "hub", HubReplicas: 1}
		}, "nats.leaf.nkey", "unset"},
		{"leaf nkey missing", func(c *Config) { c.NATS.Leaf.URL, c.NATS.Leaf.NKey = "nats-leaf://hub:7422", "/nonexistent/seed.nk" }, "nats.leaf.nkey", "NKey seed file"},
		{"leaf tls cert without key", func(c *Config) {
			c.NATS.Leaf = Leaf{URL: "tls://hub:7422", NKey: pem, TLS: bus.TLSFiles{Cert: pem}, HubDomain: "hub", HubReplicas: 1}
		}, "nats.leaf.tls.key", "the client key file"},
		{"hub replicas", func(c *Config) { c.NATS.Leaf.HubReplicas = 7 }, "nats.leaf.hub_replicas", "1 to 5"},
		{"hub domain with a dot", func(c *Config) { c.NATS.Leaf.HubDomain = "hub.a" }, "nats.leaf.hub_domain", "JetStream domain"},
		{"hub domain is the sidecar's", func(c *Config) {
			c.Sidecar.ID, c.NATS.Leaf = "gpu-1", Leaf{URL: "nats-leaf://hub:7422", NKey: pem, HubDomain: "gpu-1", HubReplicas: 1}
		}, "nats.leaf.hub_domain", "other than sidecar.id"},
		{"nats credentials missing", func(c *Config) { c.NATS.Credentials = filepath.Join(dir, "none") }, "nats.credentials", "existing"},
		{"nats nkey is a directory", func(c *Config) { c.NATS.NKey = dir }, "nats.nkey", "existing"},
		{"tls cert without key", func(c *Config) { c.NATS.TLS.Cert = pem }, "nats.tls.key", "client key"},
		{"launcher key is a seed", func(c *Config) { c.NATS.Launchers.NKeys = []string{"SUAIBDPBAUTW"} }, "nats.launchers.nkeys[0]", "public user NKey"},
		{"event budget too low", func(c *Config) { c.Predictor.MaxEvents = 1000 }, "predictor.max_events", "a count of events"},
		{"tenant rate negative", func(c *Config) { c.NATS.Limits.TenantRate = -1 }, "nats.limits.tenant_rate", "requests per second"},
		{"tenant watches past the sidecar's", func(c *Config) { c.NATS.Limits.TenantWatches = 300 }, "nats.limits.tenant_watches", "256 watch consumers"},
		{"decide queue negative", func(c *Config) { c.NATS.Limits.DecideQueue = -1 }, "nats.limits.decide_queue", "a count"},
		{"launcher connections negative", func(c *Config) { c.NATS.Launchers.MaxConnections = -1 }, "nats.launchers.max_connections", "a count"},
		{"tls key without cert", func(c *Config) { c.NATS.TLS.Key = pem }, "nats.tls.cert", "client certificate"},
		{"tls ca missing", func(c *Config) { c.NATS.TLS.CA = filepath.Join(dir, "none") }, "nats.tls.ca", "existing"},
		{"gpu backend", func(c *Config) { c.GPU.Backend = "cuda" }, "gpu.backend", "auto, nvml, sim"},
		{"gpu device", func(c *Config) { c.GPU.Device = "256" }, "gpu.device", "0–255"},
		{"gpu device leading zero", func(c *Config) { c.GPU.Device = "01" }, "gpu.device", "GPU or MIG device UUID"},
		{"gpu device MIG in two parts", func(c *Config) { c.GPU.Device = "0:1" }, "gpu.device", "<gpu>:<gi>:<ci>"},
		{"MIG device on the default pipe dir", func(c *Config) { c.GPU.Device = "0:1:0" }, "mps.pipe_dir", "this MIG device's own"},
		{"gpu device MIG on the simulated GPU", func(c *Config) { c.GPU.Backend, c.GPU.Device, c.MPS.PipeDir = "sim", "0:1:0", "/run/mps-0-1" }, "gpu.device", "unless gpu.sim.mig partitions"},
		{"gpu sms", func(c *Config) { c.GPU.SMs = 2000 }, "gpu.sms", "1 to 1024"},
		{"gpu event_wait", func(c *Config) { c.GPU.EventWait = time.Hour }, "gpu.event_wait", "1m"},
		{"gpu sim name", func(c *Config) { c.GPU.Sim.Name = "" }, "gpu.sim.name", "printable"},
		{"gpu sim memory", func(c *Config) { c.GPU.Sim.MemoryMiB = 1 << 30 }, "gpu.sim.memory_mib", "MiB"},
		{"sharing mode", func(c *Config) { c.Sharing.Mode = "mig" }, "sharing.mode", "mps, timeslice"},
		{"mps control empty", func(c *Config) { c.MPS.Control = "" }, "mps.control", `"sim"`},
		{"mps pipe_dir relative", func(c *Config) { c.MPS.PipeDir = "mps" }, "mps.pipe_dir", "absolute"},
		{"mps log_dir unclean", func(c *Config) { c.MPS.LogDir = "/var/log/../log" }, "mps.log_dir", "clean absolute"},
		{"mps pct 0", func(c *Config) { c.MPS.DefaultActiveThreadPct = 0 }, "mps.default_active_thread_pct", "1 to 100"},
		{"mps pct 101", func(c *Config) { c.MPS.DefaultActiveThreadPct = 101 }, "mps.default_active_thread_pct", "1 to 100"},
		{"mps pinned memory", func(c *Config) { c.MPS.PinnedMemLimitMiB = -5 }, "mps.pinned_mem_limit_mib", "MiB"},
		{"mps client priority", func(c *Config) { c.MPS.ClientPriority = 2 }, "mps.client_priority", "0 (normal) or 1"},
		{"mps command timeout", func(c *Config) { c.MPS.CommandTimeout = 0 }, "mps.command_timeout", "above 0"},
		{"predictor calibration missing", func(c *Config) { c.Predictor.Calibration = filepath.Join(dir, "none.json") }, "predictor.calibration", "existing"},
		{"predictor calibration invalid", func(c *Config) { c.Predictor.Calibration = badCal }, "predictor.calibration", "colocd.calibration/v1"},
		{"predictor calibration is a device", func(c *Config) { c.Predictor.Calibration = os.DevNull }, "predictor.calibration", "existing"},
		{"predictor requests", func(c *Config) { c.Predictor.Requests = 0 }, "predictor.requests", "1 to 1000000"},
		{"no services", func(c *Config) { c.Services = nil }, "services", "at least one"},
		{"service name empty", func(c *Config) { c.Services[0].Name = "" }, "services[0].name", "letters"},
		{"duplicate service", func(c *Config) { c.Services = append(c.Services, c.Services[0]) }, "services[1].name", "unique"},
		{"profile empty", func(c *Config) { c.Services[0].Profile = "" }, "services[0].profile", "colocd.profile/v1"},
		{"profile missing", func(c *Config) { c.Services[0].Profile = filepath.Join(dir, "none.json") }, "services[0].profile", "existing"},
		{"profile invalid", func(c *Config) { c.Services[0].Profile = notProfile }, "services[0].profile", "valid colocd.profile/v1"},
		{"profile of a training job", func(c *Config) { c.Services[0].Profile = absPath(t, trainingProfile) }, "services[0].profile", "kind inference"},
		{"rate zero", func(c *Config) { c.Services[0].RateRPS = 0 }, "services[0].rate_rps", "[0.001, 1e9]"},
		{"rate infinite", func(c *Config) { c.Services[0].RateRPS = math.Inf(1) }, "services[0].rate_rps", "[0.001, 1e9]"},
		{"rate below the predictor's", func(c *Config) { c.Services[0].RateRPS = 1e-9 }, "services[0].rate_rps", "[0.001, 1e9]"},
		{"rate above the predictor's", func(c *Config) { c.Services[0].RateRPS = 2e9 }, "services[0].rate_rps", "[0.001, 1e9]"},
		{"slo negative", func(c *Config) { c.Services[0].SLO.P99MS = -1 }, "services[0].slo.p99_ms", "above 0"},
		{"step slo on a request service", func(c *Config) { c.Services[0].SLO.StepP99MS = 40 }, "services[0].slo.step_p99_ms", "only an engine"},
		{"engine busy 1", func(c *Config) { engine(c); c.Services[0].Engine.Busy = 1 }, "services[0].engine.busy", "(0, 1)"},
		{"engine burst below a step", func(c *Config) { engine(c); c.Services[0].Engine.BurstSteps = 0.5 }, "services[0].engine.burst_steps", "[1, 100000]"},
		{"engine burst without busy", func(c *Config) { engine(c); c.Services[0].Engine = Engine{BurstSteps: 64} }, "services[0].engine.busy", "(0, 1)"},
		{"engine burst above a tenth of the simulated steps", func(c *Config) { engine(c); c.Services[0].Engine.BurstSteps = 201 }, "services[0].engine.burst_steps", "predictor.requests / 10"},
		{"engine with a rate", func(c *Config) { engine(c); c.Services[0].RateRPS = 10 }, "services[0].rate_rps", "engine.busy is its load"},
		{"engine with a request slo", func(c *Config) { engine(c); c.Services[0].SLO.P99MS = 100 }, "services[0].slo.p99_ms", "step_p99_ms"},
		{"engine without a step slo", func(c *Config) { engine(c); c.Services[0].SLO.StepP99MS = 0 }, "services[0].slo.step_p99_ms", "above 0"},
		{"engine observed by triton", func(c *Config) {
			engine(c)
			c.Services[0].Metrics = observe.Endpoint{URL: "http://127.0.0.1:8002/metrics", Preset: "triton"}
		}, "services[0].metrics.preset", "[tgi vllm generic]"},
		{"headroom 1", func(c *Config) { c.Admission.Headroom = 1 }, "admission.headroom", "[0, 1)"},
		{"headroom NaN", func(c *Config) { c.Admission.Headroom = math.NaN() }, "admission.headroom", "[0, 1)"},
		{"max jobs", func(c *Config) { c.Admission.MaxJobs = 0 }, "admission.max_jobs", "≥ 1"},
		{"memory reserve", func(c *Config) { c.Admission.MemoryReserveMiB = -1 }, "admission.memory_reserve_mib", "≥ 0"},
		{"pct step 0", func(c *Config) { c.Admission.PctStep = 0 }, "admission.pct_step", "1 to 100"},
		{"pct step 101", func(c *Config) { c.Admission.PctStep = 101 }, "admission.pct_step", "1 to 100"},
		{"max weight 0.5", func(c *Config) { c.Admission.MaxWeight = 0.5 }, "admission.max_weight", "1 to 1000"},
		{"max weight NaN", func(c *Config) { c.Admission.MaxWeight = math.NaN() }, "admission.max_weight", "1 to 1000"},
		{"min move -1", func(c *Config) { c.Admission.Guard.MinMovePct = -1 }, "admission.guard.min_move_pct", "0 (one pct_step) to 100"},
		{"min move 101", func(c *Config) { c.Admission.Guard.MinMovePct = 101 }, "admission.guard.min_move_pct", "0 (one pct_step) to 100"},
		{"lease default above max", func(c *Config) { c.Admission.Lease.Default = 2 * time.Hour }, "admission.lease.default", "at most admission.lease.max"},
		{"lease default zero", func(c *Config) { c.Admission.Lease.Default = 0 }, "admission.lease.default", "at least 1s"},
		{"lease max zero", func(c *Config) { c.Admission.Lease.Max = 0 }, "admission.lease.max", "at least 1s"},
		{"telemetry http", func(c *Config) { c.Telemetry.HTTP = "9464" }, "telemetry.http", "host:port"},
		{"telemetry tracing", func(c *Config) { c.Telemetry.Tracing = "jaeger" }, "telemetry.tracing", "none, console, otlp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.mutate(c)
			err := c.Validate()
			if keys := problemKeys(t, err); !reflect.DeepEqual(keys, []string{tt.key}) {
				t.Fatalf("problems %q, want [%s]: %v", keys, tt.key, err)
			}
			var ve *field.List
			errors.As(err, &ve)
			if p := ve.Errors[0]; !strings.Contains(p.Want, tt.want) {
				t.Errorf("want %q does not say %q", p.Want, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "invalid configuration: "+tt.key+": want ") {
				t.Errorf("error %q does not start with the key", err)
			}
		})
	}
}

// TestValidateAllAtOnce: every problem is reported in one error.
func TestValidateAllAtOnce(t *testing.T) {
	t.Parallel()
	c := validConfig(t)
	c.GPU.Backend = "cuda"
	c.Sharing.Mode = "mig"
	c.Telemetry.Tracing = "jaeger"
	c.Admission.Headroom = 1.5
	c.Admission.MaxJobs = 0
	c.Admission.Lease.Default = 2 * time.Hour
	c.Services = append(c.Services,
		Service{Name: "bert", Profile: c.Services[0].Profile, RateRPS: -1, SLO: SLO{P99MS: 0}})
	err := c.Validate()
	want := []string{"gpu.backend", "sharing.mode", "services[1].name", "services[1].rate_rps",
		"services[1].slo.p99_ms", "admission.headroom", "admission.max_jobs", "admission.lease.default", "telemetry.tracing"}
	got := problemKeys(t, err)
	if len(got) != len(want) {
		t.Errorf("problems %q, want %q", got, want)
	}
	wantKeys(t, err, want...)
	for _, k := range want {
		if !strings.Contains(err.Error(), k+": want ") {
			t.Errorf("error does not name %s: %v", k, err)
		}
	}
}

// engine makes the first service a valid LLM engine.
func engine(c *Config) {
	c.Services[0].RateRPS, c.Services[0].SLO = 0, SLO{StepP99MS: 40}
	c.Services[0].Engine = Engine{Busy: 0.6}
}
