package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo is what colocd version prints: the release, and the commit it
// was built from (the go command stamps it when it builds in a checkout).
type buildInfo struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// readBuildInfo reads the binary's own build information.
func readBuildInfo() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(version, bi)
}

// fromBuildInfo is readBuildInfo for a given -X version and build info
// (nil: none): the -X version unless it is the default, else the module's.
func fromBuildInfo(v string, bi *debug.BuildInfo) buildInfo {
	out := buildInfo{Version: semver(v), Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return out
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		out.Version = semver(bi.Main.Version)
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Commit = s.Value
		case "vcs.time":
			out.CommitTime = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

// short is the one line of --version: the release and a short commit.
func (b buildInfo) short() string {
	s := b.Version
	if b.Commit != "" {
		s += " (" + b.Commit[:min(12, len(b.Commit))]
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print colocd's version, the commit it was built from, and its Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := readBuildInfo()
			if asJSON {
				return printJSON(cmd.OutOrStdout(), b)
			}
			commit := b.Commit
			switch {
			case commit == "":
				commit = "unknown (not built from a checkout)"
			case b.Modified:
				commit += " (modified)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "colocd %s\ncommit %s\nbuilt  %s %s\n", b.Version, commit, b.Go, b.Platform)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
