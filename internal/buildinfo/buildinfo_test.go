package buildinfo

import (
	"runtime/debug"
	"testing"
)

// The version names the commit a checkout build was stamped with, and says
// when the tree had changes; an -X version wins over the module's.
func TestFrom(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "87dd499f872e65ea6c4dfefb66390827ce496c68"},
		{Key: "vcs.time", Value: "2026-12-03T11:12:59Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	b := From("dev", bi)
	if b.Version != "0.0.0-dev" || b.Commit != "87dd499f872e65ea6c4dfefb66390827ce496c68" || !b.Modified || b.CommitTime == "" {
		t.Errorf("from a checkout build: %+v", b)
	}
	if got := b.Short(); got != "0.0.0-dev (87dd499f872e, modified)" {
		t.Errorf("--version line %q", got)
	}
	if b := From("v1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261203111259-87dd499f872e"}}); b.Version != "1.4.0" || b.Short() != "1.4.0" {
		t.Errorf("an -X version wins over the module's: %+v", b)
	}
	if b := From("dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.5.0"}}); b.Version != "1.5.0" {
		t.Errorf("go install's module version: %+v", b)
	}
}
