package main

import (
	"strings"
	"testing"
)

func TestLoadtestFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"embedded and server", []string{"--embedded", "--server", "nats://127.0.0.1:4222"}, "--embedded and --server: want one of the two"},
		{"no launchers", []string{"--embedded", "--launchers", "0"}, "--launchers: want 1 to 10000, got 0"},
		{"no duration", []string{"--embedded", "--duration", "0s"}, "--duration: want > 0, got 0s"},
		{"bad sidecar", []string{"--sidecar", "a b", "--profile", profilesDir + "/v100-train-step.json"}, "--sidecar:"},
		{"decision timeout range", []string{"--embedded", "--decision-timeout", "500ms"}, "--decision-timeout: want 1s to 10m, got 500ms"},
		{"decision timeout external", []string{"--sidecar", "gpu0", "--decision-timeout", "1m"}, "--decision-timeout: want --embedded"},
		{"inference profile", []string{"--embedded", "--profile", profilesDir + "/v100-infer-200.json"}, "--profile: want a training profile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"loadtest"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
