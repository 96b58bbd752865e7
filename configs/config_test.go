package configs

import (
	"bytes"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/colocd/colocd/gpu"
	"github.com/spf13/viper"
)

// defaultYAML spells out every key at its default, as DESIGN.md lists them.
const defaultYAML = `
sidecar:   {id: "", data_dir: /var/lib/colocd}
nats:      {url: "", listen: "127.0.0.1:4222", credentials: "", nkey: "", tls: {ca: "", cert: "", key: ""}, replicas: 0}
gpu:       {backend: auto, device: "0", sms: 0, event_wait: 1s, sim: {name: "NVIDIA H200", memory_mib: 0}}
sharing:   {mode: mps}
mps:       {control: nvidia-cuda-mps-control, pipe_dir: /tmp/nvidia-mps, log_dir: /var/log/nvidia-mps,
            manage_daemon: true, default_active_thread_pct: 100, pinned_mem_limit_mib: 0,
            client_priority: 0, quit_on_close: false, command_timeout: 10s}
predictor: {calibration: "", requests: 2000, seed: 1}
services:  []
admission: {headroom: 0.1, max_jobs: 4, memory_reserve_mib: 2048, pct_step: 5, lease: {default: 5m, max: 1h}}
fleet:     {heartbeat: 10s, ttl: 30s, typical_profile: ""}
telemetry: {http: "127.0.0.1:9464", tracing: none}
`

func TestDefaultsRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string
	}{
		{"no file", ""},
		{"empty file", configFile(t, "")},
		{"comments only", configFile(t, "# nothing\n")},
		{"every key at its default", configFile(t, defaultYAML)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustLoad(t, tt.path)
			got.lines = nil // where the keys stood in the file
			if want := Default(); !reflect.DeepEqual(*got, want) {
				t.Errorf("Load = %+v\nwant %+v", *got, want)
			}
		})
	}
}

func TestDefaultValues(t *testing.T) {
	t.Parallel()
	d := Default()
	tests := []struct {
		name      string
		got, want any
	}{
		{"sidecar.data_dir", d.Sidecar.DataDir, "/var/lib/colocd"},
		{"nats.listen", d.NATS.Listen, "127.0.0.1:4222"},
		{"gpu.backend", d.GPU.Backend, gpu.BackendAuto},
		{"gpu.device", d.GPU.Device, "0"},
		{"gpu.sim.name", d.GPU.Sim.Name, "NVIDIA H200"},
		{"sharing.mode", d.Sharing.Mode, "mps"},
		{"mps.control", d.MPS.Control, "nvidia-cuda-mps-control"},
		{"mps.command_timeout", d.MPS.CommandTimeout, 10 * time.Second},
		{"predictor.requests", d.Predictor.Requests, 2000},
		{"predictor.seed", d.Predictor.Seed, uint64(1)},
		{"admission.headroom", d.Admission.Headroom, 0.1},
		{"admission.lease.default", d.Admission.Lease.Default, 5 * time.Minute},
		{"admission.lease.max", d.Admission.Lease.Max, time.Hour},
		{"telemetry.tracing", d.Telemetry.Tracing, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	// The defaults are valid except for the services they lack.
	err := d.Validate()
	if keys := problemKeys(t, err); !reflect.DeepEqual(keys, []string{"services"}) {
		t.Errorf("Default().Validate() problems = %q, want only services", keys)
	}
}

// TestExample checks that configs/colocd.yaml, which `make run` uses, loads,
// validates and says what its comments say.
func TestExample(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, "colocd.yaml")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"gpu.backend", c.GPU.Backend, BackendAuto},
		{"simulated MPS without a GPU", c.MPS.Simulated(true), true},
		{"real MPS on a GPU host", c.MPS.Simulated(false), false},
		{"sharing.mode", c.Sharing.Mode, ModeMPS},
		{"nats.url", c.NATS.URL, ""},
		{"nats.listen", c.NATS.Listen, "127.0.0.1:4222"},
		{"sidecar.data_dir", c.Sidecar.DataDir, absPath(t, "../.colocd")},
		{"services[0].profile", c.Services[0].Profile, absPath(t, inferenceProfile)},
		{"services[0].rate_rps", c.Services[0].RateRPS, 8.0},
		{"services[0].slo.p99_ms", c.Services[0].SLO.P99MS, 100.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	// Every key is spelled out in the example.
	raw, err := os.ReadFile("colocd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := viper.New()
	file.SetConfigType("yaml")
	if err := file.ReadConfig(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		if !file.IsSet(k) {
			t.Errorf("colocd.yaml does not spell out %s", k)
		}
	}
}
