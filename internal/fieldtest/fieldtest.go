// Package fieldtest checks, in tests, the one shape of a bad input's
// error (internal/field): which fields it names, in order, and what it
// says, so that every package tests its error contracts the same way.
package fieldtest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/field"
)

// WantPaths fails t unless err is a *field.List whose problems are at
// exactly the paths want, in order, each saying what it wants. With no
// paths, err must be nil.
func WantPaths(t testing.TB, err error, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Errorf("err = %v, want nil", err)
		}
		return
	}
	var l *field.List
	if !errors.As(err, &l) {
		t.Errorf("err = %v, want a *field.List with problems at %q", err, want)
		return
	}
	var got []string
	for _, e := range l.Errors {
		if e.Want == "" {
			t.Errorf("%s: the problem does not say what is wanted", e.Path)
		}
		got = append(got, e.Path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems at %q, want %q (err = %v)", got, want, err)
	}
}

// WantText fails t unless err is not nil and its text contains each of
// wants; it reports whether it did.
func WantText(t testing.TB, err error, wants ...string) bool {
	t.Helper()
	ok := true
	for _, w := range wants {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v, want it to contain %q", err, w)
			ok = false
		}
	}
	return ok
}
