package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The version names the commit a checkout build was stamped with, and says
// when the tree had changes; without stamps it says the commit is unknown.
func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "87dd499f872e65ea6c4dfefb66390827ce496c68"},
		{Key: "vcs.time", Value: "2026-12-03T11:12:59Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	b := fromBuildInfo("dev", bi)
	if b.Version != "0.0.0-dev" || b.Commit != "87dd499f872e65ea6c4dfefb66390827ce496c68" || !b.Modified || b.CommitTime == "" {
		t.Errorf("from a checkout build: %+v", b)
	}
	if got := b.short(); got != "0.0.0-dev (87dd499f872e, modified)" {
		t.Errorf("--version line %q", got)
	}
	if b := fromBuildInfo("v1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261203111259-87dd499f872e"}}); b.Version != "1.4.0" || b.short() != "1.4.0" {
		t.Errorf("an -X version wins over the module's: %+v", b)
	}
	if b := fromBuildInfo("dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.5.0"}}); b.Version != "1.5.0" {
		t.Errorf("go install's module version: %+v", b)
	}

	out, _, err := runCLI(t, "version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got buildInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Go != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH || got.Version == "" {
		t.Errorf("version --json: %s (%v)", out, err)
	}
	if out, _, err := runCLI(t, "version"); err != nil || !strings.HasPrefix(out, "colocd "+got.Version+"\ncommit ") {
		t.Errorf("version: %q, %v", out, err)
	}
}

// Every command's --help has an example; each example line runs a command
// that exists, with flags it has.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := newRootCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root {
			return
		}
		if c.Example == "" {
			t.Errorf("%s has no example", c.CommandPath())
			return
		}
		for line := range strings.SplitSeq(c.Example, "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), `eval "$(`))
			if !strings.HasPrefix(line, "colocd ") {
				continue // a comment, or a continued line
			}
			words := strings.Fields(line)
			cmd, rest, err := root.Find(words[1:])
			if err != nil || cmd == root {
				t.Errorf("%s: example %q runs no command: %v", c.CommandPath(), line, err)
				continue
			}
			if !strings.HasPrefix(cmd.CommandPath(), c.CommandPath()) {
				t.Errorf("%s: example %q is %s's", c.CommandPath(), line, cmd.CommandPath())
			}
			for _, w := range rest {
				name, _, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
				if !strings.HasPrefix(w, "--") || name == "" {
					continue
				}
				if f := lookupFlag(cmd, name); f == nil {
					t.Errorf("%s: example %q names --%s, which %s has not", c.CommandPath(), line, name, cmd.CommandPath())
				}
			}
		}
	}
	walk(root)
}

func lookupFlag(c *cobra.Command, name string) *pflag.Flag {
	if f := c.Flags().Lookup(name); f != nil {
		return f
	}
	return c.InheritedFlags().Lookup(name)
}

// Every command that prints what it found or did has --json, but the two
// that run until stopped (serve's log takes --log-format json).
func TestEveryCommandHasJSON(t *testing.T) {
	servers := map[string]bool{"colocd serve": true, "colocd simserve": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || servers[c.CommandPath()] {
			return
		}
		if c.Flags().Lookup("json") == nil {
			t.Errorf("%s has no --json", c.CommandPath())
		}
	}
	walk(newRootCmd())
}
