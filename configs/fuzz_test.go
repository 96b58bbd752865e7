package configs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/colocd/colocd/field"
)

// FuzzLoad feeds arbitrary bytes to Load as a config file: it never
// panics, every problem names a key, and a file that loads either
// validates or fails with a *field.List.
func FuzzLoad(f *testing.F) {
	// Small seeds: the fuzzer minimizes every new input it finds, which
	// takes long from a big one (TestExample covers colocd.yaml).
	for _, seed := range []string{
		defaultYAML,
		"",
		"admission: {headroom: .nan, max_jobs: 1e400, lease: {default: 300, max: -1h}}",
		"services: [{name: a, profile: /dev/null, rate_rps: .inf, slo: {p99_ms: -0}}, 5, [1]]",
		"gpu: {device: 0, sim: null}\nmps: ~\npredictor: {seed: 18446744073709551616}",
		"Admission: {HEADROOM: 0.5}\nadmission: {headroom: 0.2}",
		"a: &a [*a]",
		"- 1\n- 2",
		"nats: {url: 'nats://[::1', listen: ':-1'}",
	} {
		f.Add([]byte(seed))
	}
	path := filepath.Join(f.TempDir(), "colocd.yaml") // one per process; inputs run one at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		var ve *field.List
		if err != nil {
			if c != nil {
				t.Fatalf("Load returned a config and %v", err)
			}
			if errors.As(err, &ve) {
				checkProblems(t, ve)
			}
			return
		}
		if err := c.Validate(); err != nil {
			if !errors.As(err, &ve) {
				t.Fatalf("Validate: %v (%T), want a *field.List", err, err)
			}
			checkProblems(t, ve)
		}
	})
}

func checkProblems(t *testing.T, ve *field.List) {
	t.Helper()
	if len(ve.Errors) == 0 {
		t.Fatal("a field.List without problems")
	}
	for _, p := range ve.Errors {
		if p.Path == "" || p.Want == "" {
			t.Errorf("problem without a key or a want: %+v", p)
		}
	}
}
