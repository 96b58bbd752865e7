package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/buildinfo"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// colocd version prints the build's information, as JSON too.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, _, err := runCLI(t, "version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got buildinfo.Info
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
	t.Parallel()
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
	t.Parallel()
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
