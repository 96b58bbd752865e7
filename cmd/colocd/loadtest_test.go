package main

import (
	"testing"
)

func TestLoadtestFlags(t *testing.T) {
	t.Parallel()
	wantRefusals(t, []string{"loadtest"}, []refusal{
		{"embedded and server", []string{"--embedded", "--server", "nats://127.0.0.1:4222"}, "--embedded and --server: want one of the two"},
		{"no launchers", []string{"--embedded", "--launchers", "0"}, "--launchers: want 1 to 10000, got 0"},
		{"no duration", []string{"--embedded", "--duration", "0s"}, "--duration: want > 0, got 0s"},
		{"bad sidecar", []string{"--sidecar", "a b", "--profile", profilesDir + "/v100-train-step.json"}, "--sidecar:"},
		{"decision timeout range", []string{"--embedded", "--decision-timeout", "500ms"}, "--decision-timeout: want 1s to 10m, got 500ms"},
		{"decision timeout external", []string{"--sidecar", "gpu0", "--decision-timeout", "1m"}, "--decision-timeout: want --embedded"},
		{"inference profile", []string{"--embedded", "--profile", profilesDir + "/v100-infer-200.json"}, "--profile: want a training profile"},
	})
}
