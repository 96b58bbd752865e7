package main

import (
	"strings"
	"testing"
)

// colocd completion prints a script for each shell, and the completions it
// asks for name the commands and flags that exist: "de" completes to demo,
// "predict --sv" to --svg.
func TestShellCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "__start_colocd", "zsh": "#compdef colocd", "fish": "complete -c colocd", "powershell": "Register-ArgumentCompleter"} {
		out, _, err := runCLI(t, "completion", shell)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("completion %s: %v, want a script with %q (%d bytes)", shell, err, want, len(out))
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "de"}, "demo\t"},
		{[]string{"__complete", "predict", "--sv"}, "--svg\t"},
		{[]string{"__complete", "mig", ""}, "layouts\t"},
	} {
		out, _, err := runCLI(t, tt.args...)
		if err != nil || !strings.Contains(out, tt.want) {
			t.Errorf("%v: %v, want %q among\n%s", tt.args, err, tt.want, out)
		}
	}
}
