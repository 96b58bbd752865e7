// Package field is the one shape of "this field of this input is wrong":
// the field's path, what was wanted and what was found, and for a file the
// line. Every document colocd reads from outside (profiles, calibrations,
// measurements, the configuration, NATS requests, MPS and GPU settings)
// reports its problems as one *List, all of them at once.
package field

import (
	"errors"
	"fmt"
	"strings"
)

// Error is one problem with one field. Path names the field as the input
// spells it ("ops[3].dur_us", "admission.max_jobs"; "" for the document as
// a whole, such as a syntax error); Want says what was
// expected; Got, when set, what was found; Line, when > 0, is the field's
// line in the file.
type Error struct {
	Path string
	Want string
	Got  string
	Line int
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString("want ")
	b.WriteString(e.Want)
	if e.Got != "" {
		b.WriteString(", got ")
		b.WriteString(e.Got)
	}
	return b.String()
}

// List holds every problem found in one document, so that a user fixes
// them all in one pass instead of one per run.
type List struct {
	// Doc says what was read: "profile \"bert\"", "configuration".
	Doc    string
	Errors []*Error
	// Kind, when set, is a sentinel that errors.Is matches (a package's
	// ErrInvalid), so that callers branch without knowing this type.
	Kind error
}

func (l *List) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid %s: ", l.Doc)
	for i, e := range l.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find each *Error.
func (l *List) Unwrap() []error {
	out := make([]error, len(l.Errors))
	for i, e := range l.Errors {
		out[i] = e
	}
	return out
}

// Is matches Kind.
func (l *List) Is(target error) bool { return l.Kind != nil && target == l.Kind }

// Checker collects problems while a document is walked. The zero value is
// ready to use.
type Checker struct {
	errs []*Error
}

// Add records one problem.
func (c *Checker) Add(path, want, got string) {
	c.errs = append(c.errs, &Error{Path: path, Want: want, Got: got})
}

// Nested records the problems of err, a *List (or one *Error) about a part
// of the document, under prefix; any other error becomes one problem of the
// field prefix.
func (c *Checker) Nested(prefix string, err error) {
	var l *List
	var e *Error
	switch {
	case errors.As(err, &l):
		for _, f := range l.Errors {
			n := *f
			n.Path = Join(prefix, f.Path)
			c.errs = append(c.errs, &n)
		}
	case errors.As(err, &e):
		n := *e
		n.Path = Join(prefix, e.Path)
		c.errs = append(c.errs, &n)
	default:
		c.Add(prefix, "a valid value", err.Error())
	}
}

// Len is the number of problems so far.
func (c *Checker) Len() int { return len(c.errs) }

// Err returns the problems as a *List about doc, or nil when there are none.
func (c *Checker) Err(doc string) error { return c.ErrKind(doc, nil) }

// ErrKind is Err with a sentinel that errors.Is matches.
func (c *Checker) ErrKind(doc string, kind error) error {
	if len(c.errs) == 0 {
		return nil
	}
	return &List{Doc: doc, Errors: c.errs, Kind: kind}
}

// Join joins a path prefix and a sub-path: "profile" and "ops[1].sm" make
// "profile.ops[1].sm"; an index sub-path ("[2]") joins without a dot.
func Join(prefix, path string) string {
	switch {
	case prefix == "":
		return path
	case path == "":
		return prefix
	case strings.HasPrefix(path, "["):
		return prefix + path
	}
	return prefix + "." + path
}
