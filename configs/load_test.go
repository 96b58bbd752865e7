package configs

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/gpu"
)

func TestEnvName(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"nats.url":            "COLOCD_NATS_URL",            // a section's key
		"admission.lease.max": "COLOCD_ADMISSION_LEASE_MAX", // a nested key
		"admission.max_jobs":  "COLOCD_ADMISSION_MAX_JOBS",  // an underscore
		"nats.tls.cert":       "COLOCD_NATS_TLS_CERT",       // deep
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, filepath.Join(dir, "c.yaml"), `
nats: {url: "nats://file:4222"}
admission: {max_jobs: 2, lease: {max: 2h}}
`)
	tests := []struct {
		name      string
		env       map[string]string
		overrides map[string]any
		wantURL   string
		wantJobs  int
		wantMax   time.Duration
	}{
		{"file over default", nil, nil, "nats://file:4222", 2, 2 * time.Hour},
		{"env over file", map[string]string{"COLOCD_NATS_URL": "nats://env:4222", "COLOCD_ADMISSION_MAX_JOBS": "3", "COLOCD_ADMISSION_LEASE_MAX": "3h"},
			nil, "nats://env:4222", 3, 3 * time.Hour},
		{"flag over env", map[string]string{"COLOCD_NATS_URL": "nats://env:4222", "COLOCD_ADMISSION_MAX_JOBS": "3"},
			map[string]any{"nats.url": "nats://flag:4222", "admission.max_jobs": 7, "admission.lease.max": "4h"}, "nats://flag:4222", 7, 4 * time.Hour},
		{"flag over file", nil, map[string]any{"admission.lease.max": 90 * time.Minute}, "nats://file:4222", 2, 90 * time.Minute},
		{"empty env is unset", map[string]string{"COLOCD_NATS_URL": ""}, nil, "nats://file:4222", 2, 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadWithEnv(t, file, tt.env, tt.overrides)
			if c.NATS.URL != tt.wantURL || c.Admission.MaxJobs != tt.wantJobs || c.Admission.Lease.Max != tt.wantMax {
				t.Errorf("got url %q, max_jobs %d, lease.max %v; want %q, %d, %v",
					c.NATS.URL, c.Admission.MaxJobs, c.Admission.Lease.Max, tt.wantURL, tt.wantJobs, tt.wantMax)
			}
			// Keys nobody set keep their defaults.
			if c.Admission.Headroom != 0.1 || c.Admission.Lease.Default != 5*time.Minute {
				t.Errorf("defaults lost: headroom %v, lease.default %v", c.Admission.Headroom, c.Admission.Lease.Default)
			}
		})
	}
}

// TestLoadEnvEveryKey sets each key's environment variable, with no file
// mentioning the key, and checks that it took effect.
func TestLoadEnvEveryKey(t *testing.T) {
	for _, l := range leaves {
		if !l.env {
			continue
		}
		t.Run(l.key, func(t *testing.T) {
			var env string
			var want any
			switch d := l.val.(type) {
			case string:
				env, want = "set-"+strings.ReplaceAll(l.key, ".", "-"), "set-"+strings.ReplaceAll(l.key, ".", "-")
			case gpu.Backend: // a string of the gpu package's own type
				env, want = string(gpu.BackendSim), gpu.BackendSim
			case bool:
				env, want = fmt.Sprint(!d), !d
			case int:
				env, want = fmt.Sprint(d+7), d+7
			case uint64:
				env, want = fmt.Sprint(d+7), d+7
			case float64:
				env, want = fmt.Sprint(d+0.25), d+0.25
			case time.Duration:
				env, want = (d + time.Minute).String(), d+time.Minute
			default:
				t.Fatalf("no test value for %T", d)
			}
			t.Setenv(EnvName(l.key), env)
			c := mustLoad(t, "")
			if got := valueAt(reflect.ValueOf(*c), l.key); got != want {
				t.Errorf("%s=%s: %s = %v, want %v", EnvName(l.key), env, l.key, got, want)
			}
		})
	}
}

// valueAt reads a dotted key of a struct value.
func valueAt(v reflect.Value, key string) any {
	for part := range strings.SplitSeq(key, ".") {
		f, _ := fieldByTag(v.Type(), part)
		v = v.FieldByIndex(f.Index)
	}
	return v.Interface()
}

func TestLoadUnknownKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		yaml      string
		overrides map[string]any
		want      []string
	}{
		{"top level", "nats: {url: \"\"}\nsharding: {mode: mps}\n", nil, []string{"sharding"}},
		{"nested", "admission: {headrom: 0.2, lease: {maximum: 1h}}\n", nil, []string{"admission.headrom", "admission.lease.maximum"}},
		{"in a service", "services: [{name: a, slo: {p99: 5}}, {name: b, rate: 3}]\n", nil, []string{"services[0].slo.p99", "services[1].rate"}},
		{"several at once", "foo: 1\ngpu: {bakend: sim}\nmps: {pct: 5}\n", nil, []string{"foo", "gpu.bakend", "mps.pct"}},
		{"override", "", map[string]any{"nats.urll": "x", "admission": 1}, []string{"admission", "nats.urll"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadWith(configFile(t, tt.yaml), tt.overrides)
			keys := problemKeys(t, err)
			if !reflect.DeepEqual(keys, tt.want) {
				t.Errorf("problems %q, want %q (%v)", keys, tt.want, err)
			}
			for _, k := range tt.want {
				if !strings.Contains(err.Error(), k+": want ") {
					t.Errorf("error %q does not name %s", err, k)
				}
			}
		})
	}
}

func TestLoadTypeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, key, got string
	}{
		{"text for a number", "admission: {max_jobs: many}", "admission.max_jobs", `"many"`},
		{"fraction for a whole number", "admission: {pct_step: 2.5}", "admission.pct_step", "2.5 (not a whole number)"},
		{"duration without unit", "admission: {lease: {default: 300}}", "admission.lease.default", "300 (a number without a unit)"},
		{"bad duration", "mps: {command_timeout: soon}", "mps.command_timeout", ""},
		{"negative seed", "predictor: {seed: -1}", "predictor.seed", "-1 (negative)"},
		{"boolean for a number", "admission: {headroom: true}", "admission.headroom", "true (a boolean)"},
		{"text for a boolean", "mps: {manage_daemon: maybe}", "mps.manage_daemon", `"maybe"`},
		{"scalar for a section", "admission: 5", "admission", "5"},
		{"scalar for an SLO", "services: [{name: a, slo: 5}]", "services[0].slo", "5"},
		{"huge number", "admission: {max_jobs: 1e30}", "admission.max_jobs", "1e+30 (out of range)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(configFile(t, tt.yaml))
			keys := problemKeys(t, err)
			if !reflect.DeepEqual(keys, []string{tt.key}) {
				t.Fatalf("problems %q, want [%s] (%v)", keys, tt.key, err)
			}
			var ve *field.List
			errors.As(err, &ve)
			if p := ve.Errors[0]; tt.got != "" && p.Got != tt.got {
				t.Errorf("got %q, want %q", p.Got, tt.got)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, path, want string
	}{
		{"missing file", filepath.Join(dir, "nope.yaml"), "load config"},
		{"not YAML", writeFile(t, filepath.Join(dir, "bad.yaml"), "a: [1, 2\n"), "load config"},
		{"a list, not a map", writeFile(t, filepath.Join(dir, "list.yaml"), "- 1\n- 2\n"), "load config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLoadRelativePaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "colocd")
	path := writeFile(t, filepath.Join(dir, "colocd.yaml"), `
sidecar: {data_dir: state}
nats: {credentials: secrets/c.creds, tls: {ca: /abs/ca.pem, cert: ../pki/cert.pem, key: ../pki/key.pem}}
mps: {control: ./bin/fake-control, pipe_dir: ./mps, log_dir: /var/log/nvidia-mps}
predictor: {calibration: cal.json}
services:
  - {name: a, profile: profiles/a.json}
  - {name: b, profile: /srv/b.json}
`)
	tests := []struct {
		name      string
		env       map[string]string
		overrides map[string]any
		get       func(*Config) string
		want      string
	}{
		{"data_dir", nil, nil, func(c *Config) string { return c.Sidecar.DataDir }, filepath.Join(dir, "state")},
		{"credentials", nil, nil, func(c *Config) string { return c.NATS.Credentials }, filepath.Join(dir, "secrets/c.creds")},
		{"absolute stays", nil, nil, func(c *Config) string { return c.NATS.TLS.CA }, "/abs/ca.pem"},
		{"parent directory", nil, nil, func(c *Config) string { return c.NATS.TLS.Cert }, filepath.Join(root, "etc", "pki", "cert.pem")},
		{"control with a slash", nil, nil, func(c *Config) string { return c.MPS.Control }, filepath.Join(dir, "bin", "fake-control")},
		{"pipe_dir", nil, nil, func(c *Config) string { return c.MPS.PipeDir }, filepath.Join(dir, "mps")},
		{"calibration", nil, nil, func(c *Config) string { return c.Predictor.Calibration }, filepath.Join(dir, "cal.json")},
		{"profile", nil, nil, func(c *Config) string { return c.Services[0].Profile }, filepath.Join(dir, "profiles", "a.json")},
		{"absolute profile", nil, nil, func(c *Config) string { return c.Services[1].Profile }, "/srv/b.json"},
		{"env path stays relative", map[string]string{"COLOCD_SIDECAR_DATA_DIR": "here"}, nil,
			func(c *Config) string { return c.Sidecar.DataDir }, "here"},
		{"flag path stays relative", nil, map[string]any{"predictor.calibration": "mine.json"},
			func(c *Config) string { return c.Predictor.Calibration }, "mine.json"},
		{"default untouched", nil, nil, func(c *Config) string { return c.MPS.LogDir }, "/var/log/nvidia-mps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadWithEnv(t, path, tt.env, tt.overrides)
			if got := tt.get(c); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}

	// A name without a slash is looked up in PATH: not a path.
	t.Run("control name", func(t *testing.T) {
		p := writeFile(t, filepath.Join(dir, "name.yaml"), "mps: {control: my-control}\n")
		c := mustLoad(t, p)
		if c.MPS.Control != "my-control" {
			t.Errorf("control = %q", c.MPS.Control)
		}
	})
	// Loaded from the working directory, a relative file still resolves
	// against its own directory.
	t.Run("relative config path", func(t *testing.T) {
		t.Chdir(root)
		c := mustLoad(t, filepath.Join("etc", "colocd", "colocd.yaml"))
		if want := filepath.Join(dir, "state"); c.Sidecar.DataDir != want {
			t.Errorf("data_dir = %q, want %q", c.Sidecar.DataDir, want)
		}
	})
}

// TestLoadStrictKeys: a key in another case, a key given twice and a dotted
// key are refused by name and line, with every other problem, and a problem
// found by Validate after loading names its line too.
func TestLoadStrictKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       []string // "line path"
	}{
		{"case", "admission:\n  MAX_JOBS: 1\n  pct_step: nope\n", []string{"2 admission.MAX_JOBS", "3 admission.pct_step"}},
		{"duplicate", "admission:\n  max_jobs: 1\n  max_jobs: 2\n", []string{"3 admission.max_jobs"}},
		{"dotted", "admission.max_jobs: 1\n", []string{"1 admission.max_jobs"}},
		{"validate", "sidecar:\n  id: ok\nadmission:\n  headroom: 0.1\n  max_jobs: -3\n", []string{"5 admission.max_jobs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(configFile(t, tt.yaml))
			if err == nil {
				err = c.Validate()
			}
			var ve *field.List
			if !errors.As(err, &ve) {
				t.Fatalf("got %v, want a *field.List", err)
			}
			var got []string
			for _, p := range ve.Errors {
				if strings.HasPrefix(p.Path, "admission") {
					got = append(got, fmt.Sprintf("%d %s", p.Line, p.Path))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems %v, want %v (%v)", got, tt.want, err)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Errorf("the message names no line: %v", err)
			}
		})
	}
}

// TestLoadMergeKeys: YAML merge keys and anchors load as before; a key that
// the merged mapping also sets is overridden, not repeated.
func TestLoadMergeKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	profile := absPath(t, inferenceProfile)
	path := writeFile(t, filepath.Join(dir, "merge.yaml"), fmt.Sprintf(`services:
  - &svc {name: a, profile: %s, rate_rps: 10, slo: {p99_ms: 50}}
  - <<: *svc
    name: b
`, profile))
	c := mustLoad(t, path)
	if len(c.Services) != 2 || c.Services[1].Name != "b" || c.Services[1].RateRPS != 10 {
		t.Errorf("services %+v", c.Services)
	}
}

// TestOverriddenKeyHasNoLine: a bad value that came from the environment is
// not blamed on the file's line for that key.
func TestOverriddenKeyHasNoLine(t *testing.T) {
	path := writeFile(t, filepath.Join(t.TempDir(), "c.yaml"), "admission:\n  max_jobs: 4\n")
	t.Setenv(EnvName("admission.max_jobs"), "-1")
	c, err := Load(path)
	if err == nil {
		err = c.Validate()
	}
	var ve *field.List
	if !errors.As(err, &ve) {
		t.Fatalf("got %v", err)
	}
	for _, p := range ve.Errors {
		if p.Path == "admission.max_jobs" && p.Line != 0 {
			t.Errorf("the environment's value is blamed on line %d", p.Line)
		}
	}
}

// TestLoadServiceMetrics: a service's metrics section decodes into the
// observe package's own type, and its problems name their key and line.
func TestLoadServiceMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// service is a file with one service whose metrics section is metrics
	// (lines from line 7 on).
	service := func(name, metrics string) string {
		return writeFile(t, filepath.Join(dir, name), fmt.Sprintf(`services:
  - name: chat
    profile: %s
    rate_rps: 8
    slo: {p99_ms: 100}
    metrics:
%s`, absPath(t, inferenceProfile), metrics))
	}
	c, err := Load(service("good.yaml", "      url: http://127.0.0.1:8000/metrics\n      preset: vllm\n      interval: 5s\n      labels: {model_name: llama}\n"))
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	m := c.Services[0].Metrics
	if m.URL != "http://127.0.0.1:8000/metrics" || m.Preset != "vllm" || m.Interval != 5*time.Second || m.Labels["model_name"] != "llama" {
		t.Errorf("metrics %+v", m)
	}
	tests := []struct {
		name, metrics, path string
		line                int
	}{
		{"a misspelt key", "      url: http://127.0.0.1:8000/metrics\n      preset: vllm\n      intervl: 5s\n", "services[0].metrics.intervl", 9},
		{"an unknown preset", "      url: http://127.0.0.1:8000/metrics\n      preset: ollama\n", "services[0].metrics.preset", 8},
		// Steps is set from the service, never from the file: its tag "-"
		// is no key.
		{"a key for what the file cannot set", "      url: http://127.0.0.1:8000/metrics\n      preset: vllm\n      \"-\": true\n", "services[0].metrics.-", 9},
	}
	for _, tt := range tests {
		c, err := Load(service(tt.name+".yaml", tt.metrics))
		if err == nil {
			err = c.Validate()
		}
		var ve *field.List
		if !errors.As(err, &ve) || ve.Errors[0].Path != tt.path || ve.Errors[0].Line != tt.line || strings.Contains(err.Error(), "labels, -") {
			t.Errorf("%s: %v, want %s on line %d", tt.name, err, tt.path, tt.line)
		}
	}
}

// TestLoadMapKeysInLowerCase: a label name in upper case, which the decoder
// would silently lower, is refused by name and line.
func TestLoadMapKeysInLowerCase(t *testing.T) {
	t.Parallel()
	path := writeFile(t, filepath.Join(t.TempDir(), "labels.yaml"), fmt.Sprintf(`services:
  - name: chat
    profile: %s
    rate_rps: 8
    slo: {p99_ms: 100}
    metrics:
      url: http://127.0.0.1:8000/metrics
      preset: vllm
      labels:
        Model_Name: llama
`, absPath(t, inferenceProfile)))
	_, err := Load(path)
	var ve *field.List
	if !errors.As(err, &ve) || ve.Errors[0].Path != "services[0].metrics.labels.Model_Name" || ve.Errors[0].Line != 10 {
		t.Fatalf("got %v", err)
	}
}
