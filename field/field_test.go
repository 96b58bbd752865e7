package field

import (
	"errors"
	"fmt"
	"testing"
)

var errKind = errors.New("invalid thing")

func TestListMessages(t *testing.T) {
	t.Parallel()
	var c Checker
	if c.Err("doc") != nil {
		t.Fatal("no problems, yet an error")
	}
	c.Add("ops[3].dur_us", "a duration ≥ 0", "-1")
	c.Add("name", "a non-empty name", "")
	err := c.ErrKind(`profile "p"`, errKind)
	if got, want := err.Error(), `invalid profile "p": ops[3].dur_us: want a duration ≥ 0, got -1; name: want a non-empty name`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !errors.Is(err, errKind) || errors.Is(err, errors.New("other")) {
		t.Error("Is does not match the kind alone")
	}
	var e *Error
	if !errors.As(err, &e) || e.Path != "ops[3].dur_us" {
		t.Errorf("As found %v", e)
	}
}

func TestNested(t *testing.T) {
	t.Parallel()
	var inner Checker
	inner.Add("ops[1].sm", "a fraction", "2")
	var c Checker
	c.Nested("profile", inner.Err("profile"))
	c.Nested("services", &Error{Path: "[2]", Want: "a service", Got: "none"})
	c.Nested("predictor.calibration", fmt.Errorf("open: %w", errors.New("no such file")))
	want := []string{"profile.ops[1].sm", "services[2]", "predictor.calibration"}
	l := c.Err("config").(*List)
	for i, e := range l.Errors {
		if e.Path != want[i] {
			t.Errorf("%d: path %q, want %q", i, e.Path, want[i])
		}
	}
	if l.Errors[2].Got != "open: no such file" {
		t.Errorf("a plain error becomes %q", l.Errors[2].Got)
	}
}
