package main

import (
	"slices"
	"testing"

	"github.com/colocd/colocd/replay"
)

// colocd replay reports the replay's default policies unless told
// others: the documented defaults, learned (colocd's own guard) among
// them.
func TestReplayDefaultPolicies(t *testing.T) {
	t.Parallel()
	f := newReplayCmd().Flags()
	got, err := f.GetStringSlice("policies")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range replay.DefaultPolicies {
		want = append(want, string(p))
	}
	if !slices.Equal(got, want) || !slices.Contains(got, string(replay.Learned)) {
		t.Errorf("--policies defaults to %v, want %v", got, want)
	}
}
