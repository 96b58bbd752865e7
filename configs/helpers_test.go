package configs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/colocd/colocd/field"
)

// Real profiles, from the package directory.
const (
	inferenceProfile = "../testdata/profiles/v100-infer-200.json"
	trainingProfile  = "../testdata/profiles/v100-train-step.json"
)

func absPath(t testing.TB, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// validConfig is the default configuration with one real service: it
// validates.
func validConfig(t testing.TB) *Config {
	t.Helper()
	c := Default()
	c.Services = []Service{{Name: "bert", Profile: absPath(t, inferenceProfile), RateRPS: 8, SLO: SLO{P99MS: 100}}}
	return &c
}

func writeFile(t testing.TB, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// configFile writes yaml as colocd.yaml in a directory of its own and
// returns its path.
func configFile(t testing.TB, yaml string) string {
	t.Helper()
	return writeFile(t, filepath.Join(t.TempDir(), "colocd.yaml"), yaml)
}

// mustLoad loads path, or fails.
func mustLoad(t testing.TB, path string) *Config {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loadWithEnv loads path as LoadWith does, with the environment
// variables env set for the test and the flag overrides given, or fails.
func loadWithEnv(t *testing.T, path string, env map[string]string, overrides map[string]any) *Config {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	c, err := LoadWith(path, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// problemKeys returns the keys of a *field.List, or fails.
func problemKeys(t testing.TB, err error) []string {
	t.Helper()
	var ve *field.List
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v (%T), want a *field.List", err, err)
	}
	keys := make([]string, len(ve.Errors))
	for i, p := range ve.Errors {
		keys[i] = p.Path
	}
	return keys
}

func wantKeys(t testing.TB, err error, want ...string) {
	t.Helper()
	got := problemKeys(t, err)
	for _, k := range want {
		if !slices.Contains(got, k) {
			t.Errorf("problems %q lack %q; error: %v", got, k, err)
		}
	}
}
