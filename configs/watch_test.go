package configs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/internal/runtest"
)

// waitTimeout is generous: the tests share two cores with other work, and
// a wait returns as soon as its condition holds.
const waitTimeout = 30 * time.Second

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logRecorder is a slog handler that keeps each record as one line.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, b.String())
	return nil
}

// has reports whether a line contains every part.
func (h *logRecorder) has(parts ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// configYAML is a valid configuration with the given headroom and extra
// top-level YAML.
func configYAML(t *testing.T, headroom float64, extra string) string {
	return fmt.Sprintf(`
services:
  - {name: bert, profile: %s, rate_rps: 8, slo: {p99_ms: 100}}
admission: {headroom: %v}
%s`, absPath(t, inferenceProfile), headroom, extra)
}

// runWatcher starts a watcher on path and stops it when the test ends,
// checking that Run returns.
func runWatcher(t *testing.T, path string) (*Watcher, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	w, err := NewWatcher(path, WatchOptions{Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	runtest.UntilCleanup(t, w.Run)
	waitFor(t, "the watch", func() bool { return rec.has("watching config") })
	return w, rec
}

// writeAtomic writes a file the way editors and config tools do: a
// temporary file in the same directory, renamed into place.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := writeFile(t, path+".tmp", content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func headroomIs(w *Watcher, h float64) func() bool {
	return func() bool { return w.Current().Admission.Headroom == h }
}

func TestWatcherReload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(t *testing.T, path string, rec *logRecorder)
	}{
		{"write in place", func(t *testing.T, path string, _ *logRecorder) {
			writeFile(t, path, configYAML(t, 0.2, ""))
		}},
		{"rename into place", func(t *testing.T, path string, _ *logRecorder) {
			writeAtomic(t, path, configYAML(t, 0.2, ""))
		}},
		{"delete and recreate", func(t *testing.T, path string, rec *logRecorder) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the removal to be seen", func() bool { return rec.has("config file removed") })
			writeFile(t, path, configYAML(t, 0.2, ""))
		}},
		{"rename away and back", func(t *testing.T, path string, rec *logRecorder) {
			if err := os.Rename(path, path+".old"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the removal to be seen", func() bool { return rec.has("config file removed") })
			writeAtomic(t, path, configYAML(t, 0.2, ""))
		}},
		{"burst of writes", func(t *testing.T, path string, _ *logRecorder) {
			for _, h := range []float64{0.5, 0.4, 0.3, 0.2} {
				writeFile(t, path, configYAML(t, h, ""))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := configFile(t, configYAML(t, 0.1, ""))
			w, rec := runWatcher(t, path)
			ch, cancel := w.Subscribe()
			defer cancel()

			tt.change(t, path, rec)
			waitFor(t, "headroom 0.2", headroomIs(w, 0.2))
			select {
			case c := <-ch:
				// The latest configuration only, never a stale one.
				waitFor(t, "the last publication", func() bool {
					select {
					case c = <-ch:
					default:
					}
					return c.Admission.Headroom == 0.2
				})
			case <-time.After(waitTimeout):
				t.Fatal("no configuration published")
			}
			if !rec.has("INFO config reloaded") {
				t.Errorf("no reload logged: %q", rec.lines)
			}
		})
	}
}

// TestWatcherConfigMap swaps a Kubernetes ConfigMap volume's ..data
// symlink, as the kubelet does: the file itself is never written.
func TestWatcherConfigMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "..2024_01_01", "colocd.yaml"), configYAML(t, 0.1, ""))
	symlink := func(target, link string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	symlink("..2024_01_01", "..data")
	symlink(filepath.Join("..data", "colocd.yaml"), "colocd.yaml")
	w, _ := runWatcher(t, filepath.Join(dir, "colocd.yaml"))

	writeFile(t, filepath.Join(dir, "..2024_01_02", "colocd.yaml"), configYAML(t, 0.2, ""))
	symlink("..2024_01_02", "..data_tmp")
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2024_01_01")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "headroom 0.2", headroomIs(w, 0.2))
}

// TestWatcherKeepsOldOnInvalid: a file that does not load or validate is
// refused, logged with the reason, and the next valid file is taken.
func TestWatcherKeepsOldOnInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content, logs string
	}{
		{"out of bounds", "admission: {headroom: 1.5}\n", "admission.headroom"},
		{"unknown key", "admision: {headroom: 0.2}\n", "admision"},
		{"not YAML", "services: [\n", "load config"},
		{"no services", "", "services: want at least one"},
		{"missing profile", "services: [{name: a, profile: none.json, rate_rps: 1, slo: {p99_ms: 5}}]\n", "services[0].profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := configFile(t, configYAML(t, 0.1, ""))
			w, rec := runWatcher(t, path)
			before := w.Current()

			writeFile(t, path, tt.content)
			waitFor(t, "the rejection", func() bool { return rec.has("ERROR config reload rejected", tt.logs) })
			if w.Current() != before {
				t.Errorf("configuration changed: %+v", w.Current())
			}
			writeFile(t, path, configYAML(t, 0.3, ""))
			waitFor(t, "headroom 0.3", headroomIs(w, 0.3))
		})
	}
}

// TestWatcherRestartOnlyKeys: hot keys apply, restart-only keys keep their
// running values, and a warning names them.
func TestWatcherRestartOnlyKeys(t *testing.T) {
	t.Parallel()
	path := configFile(t, configYAML(t, 0.1, ""))
	w, rec := runWatcher(t, path)

	profile := absPath(t, inferenceProfile)
	writeFile(t, path, `
nats: {url: "nats://remote:4222"}
telemetry: {tracing: console}
admission: {headroom: 0.2}
services:
  - {name: bert, profile: `+profile+`, rate_rps: 16, slo: {p99_ms: 80}}
  - {name: gpt, profile: `+profile+`, rate_rps: 2, slo: {p99_ms: 200}}
`)
	waitFor(t, "headroom 0.2", headroomIs(w, 0.2))
	c := w.Current()
	if len(c.Services) != 2 || c.Services[0].RateRPS != 16 || c.Services[1].Name != "gpt" {
		t.Errorf("services not reloaded: %+v", c.Services)
	}
	if c.NATS.URL != "" || c.Telemetry.Tracing != TracingNone {
		t.Errorf("restart-only keys changed: nats.url %q, telemetry.tracing %q", c.NATS.URL, c.Telemetry.Tracing)
	}
	waitFor(t, "the warning", func() bool { return rec.has("WARN", "restart", "keys=nats.url, telemetry.tracing") })
}

func TestWatcherLifecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, filepath.Join(dir, "colocd.yaml"), configYAML(t, 0.1, ""))

	t.Run("invalid first file", func(t *testing.T) {
		bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "admission: {headroom: 2}\n")
		_, err := NewWatcher(bad, WatchOptions{})
		var ve *field.List
		if !errors.As(err, &ve) {
			t.Errorf("err = %v, want a *field.List", err)
		}
	})
	t.Run("missing first file", func(t *testing.T) {
		if _, err := NewWatcher(filepath.Join(dir, "none.yaml"), WatchOptions{}); err == nil {
			t.Error("no error")
		}
	})
	t.Run("overrides apply at every load", func(t *testing.T) {
		w, err := NewWatcher(path, WatchOptions{Overrides: map[string]any{"admission.max_jobs": 9}})
		if err != nil {
			t.Fatal(err)
		}
		if w.Current().Admission.MaxJobs != 9 {
			t.Errorf("max_jobs = %d, want 9", w.Current().Admission.MaxJobs)
		}
	})
	t.Run("run once, then subscriptions are closed", func(t *testing.T) {
		w, err := NewWatcher(path, WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ch, cancelSub := w.Subscribe()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := w.Run(ctx); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if _, ok := <-ch; ok {
			t.Error("subscription open after Run returned")
		}
		cancelSub() // after Run closed it: no double close
		if err := w.Run(ctx); !errors.Is(err, ErrWatcherUsed) {
			t.Errorf("second Run = %v, want ErrWatcherUsed", err)
		}
		late, _ := w.Subscribe()
		if _, ok := <-late; ok {
			t.Error("subscription after Run is open")
		}
	})
	t.Run("cancel closes the channel", func(t *testing.T) {
		w, err := NewWatcher(path, WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ch, cancelSub := w.Subscribe()
		cancelSub()
		cancelSub()
		if _, ok := <-ch; ok {
			t.Error("channel open after cancel")
		}
	})
}

func TestRestartKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"nothing", func(*Config) {}, nil},
		{"hot keys only", func(c *Config) {
			c.Admission.Headroom, c.Admission.Lease.Max = 0.3, 2*time.Hour
			c.Services = append(c.Services, c.Services[0])
		}, nil},
		{"every restart-only section", func(c *Config) {
			c.Sidecar.ID, c.NATS.TLS.CA, c.GPU.Sim.MemoryMiB, c.Sharing.Mode = "x", "ca", 1, ModeTimeslice
			c.MPS.QuitOnClose, c.Predictor.Seed, c.Telemetry.HTTP = true, 2, ":1"
		}, []string{"sidecar.id", "nats.tls.ca", "gpu.sim.memory_mib", "sharing.mode", "mps.quit_on_close", "predictor.seed", "telemetry.http"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validConfig(t)
			next := validConfig(t)
			tt.mutate(next)
			got := RestartKeys(old, next)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("RestartKeys = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHotReloadable(t *testing.T) {
	t.Parallel()
	for _, k := range Keys() {
		want := k == "services" || strings.HasPrefix(k, "admission.")
		if got := HotReloadable(k); got != want {
			t.Errorf("HotReloadable(%q) = %v, want %v", k, got, want)
		}
	}
	if !HotReloadable("services[2].slo.p99_ms") {
		t.Error("a service's key is not hot-reloadable")
	}
}
