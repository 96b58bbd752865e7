package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what colocd version prints: the release, and the commit it
// was built from (the go command stamps it when it builds in a checkout).
type Info struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// Read reads the binary's own build information, with v the version set
// at build time (-ldflags -X; "dev" when none was).
func Read(v string) Info {
	bi, _ := debug.ReadBuildInfo()
	return From(v, bi)
}

// From is Read for a given -X version and build info (nil: none): the -X
// version unless it is the default, else the module's.
func From(v string, bi *debug.BuildInfo) Info {
	out := Info{Version: Semver(v), Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return out
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		out.Version = Semver(bi.Main.Version)
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

// Short is the one line of --version: the release and a short commit.
func (b Info) Short() string {
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

// Semver turns the build's version into the SemVer the micro service needs.
func Semver(v string) string {
	v = strings.TrimPrefix(v, "v")
	if v == "" || v == "dev" {
		return "0.0.0-dev"
	}
	return v
}
