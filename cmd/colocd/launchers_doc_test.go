package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/testfiles"
	"github.com/colocd/colocd/launch"
	"github.com/spf13/cobra"
)

// TestLauncherRecipesParse: every colocd run line of docs/launchers.md
// (shell blocks, and the Python list of the Ray recipe) is a command line
// this CLI accepts: its flags, their values, and a command after --.
func TestLauncherRecipesParse(t *testing.T) {
	t.Parallel()
	doc := testfiles.Read(t, "docs/launchers.md")
	var lines [][]string
	// Shell: a line from "colocd run" on, with its continuations.
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		text := strings.ReplaceAll(block[1], "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			if i := strings.Index(line, "colocd run "); i >= 0 {
				lines = append(lines, shellWords(line[i:]))
			}
		}
	}
	// Python: the list that starts with "colocd", "run"; an expression
	// stands for a value.
	for _, block := range regexp.MustCompile(`(?s)cmd = \[(.*?)\]\n`).FindAllStringSubmatch(doc, -1) {
		var argv []string
		for _, item := range splitPythonList(block[1]) {
			if s, ok := strings.CutPrefix(item, `"`); ok && strings.HasSuffix(s, `"`) {
				argv = append(argv, strings.TrimSuffix(s, `"`))
			} else {
				argv = append(argv, "value-of-an-expression")
			}
		}
		lines = append(lines, argv)
	}
	if len(lines) < 4 {
		t.Fatalf("found %d colocd run lines in docs/launchers.md, want one per recipe (at least 4)", len(lines))
	}
	t.Logf("%d colocd run lines", len(lines))
	for _, argv := range lines {
		if _, err := parseRunLine(argv); err != nil {
			t.Errorf("%q: %v", argv, err)
		}
	}
}

// parseRunLine parses argv ("colocd", "run", …) as the CLI would run it:
// its flags and their values, a command after --, a valid --on-throttle.
// It returns the command with its flags parsed.
func parseRunLine(argv []string) (*cobra.Command, error) {
	if len(argv) < 2 || argv[0] != "colocd" || argv[1] != "run" {
		return nil, errors.New("not a colocd run")
	}
	cmd, args, err := newRootCmd().Find(argv[1:])
	if err != nil {
		return nil, err
	}
	if err := cmd.ParseFlags(args); err != nil {
		return nil, err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil || cmd.ArgsLenAtDash() < 0 {
		return nil, fmt.Errorf("no command after -- (%v)", err)
	}
	if v, _ := cmd.Flags().GetString("on-throttle"); v != "restart" {
		if _, err := launch.ParseAction(v); err != nil {
			return nil, fmt.Errorf("--on-throttle: %w", err)
		}
	}
	return cmd, nil
}

// shellWords splits a line as a shell would for these recipes: words,
// "quoted" and '$(…)' parts kept whole; a # starts a comment.
func shellWords(line string) []string {
	var out []string
	var cur strings.Builder
	inWord, quote, depth := false, byte(0), 0
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
			continue
		case c == '"' || c == '\'':
			quote, inWord = c, true
			continue
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '#' && !inWord && depth == 0:
			i = len(line)
			continue
		case (c == ' ' || c == '\t') && depth == 0:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
			continue
		}
		cur.WriteByte(c)
		inWord = true
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// splitPythonList splits the items of a Python list literal at the
// commas outside parentheses and brackets.
func splitPythonList(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}
