package fieldtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/colocd/colocd/field"
)

// recorder is a testing.TB that keeps what a check reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestWantPaths(t *testing.T) {
	t.Parallel()
	var c field.Checker
	c.Add("a", "one", "")
	c.Add("b.c", "two", "x")
	list := fmt.Errorf("load: %w", c.Err("doc"))
	tests := []struct {
		name  string
		err   error
		want  []string
		fails int
	}{
		{"the paths in order", list, []string{"a", "b.c"}, 0},
		{"another order", list, []string{"b.c", "a"}, 1},
		{"one missing", list, []string{"a"}, 1},
		{"no error wanted, none", nil, nil, 0},
		{"no error wanted, one", list, nil, 1},
		{"not a list", errors.New("a: want one"), []string{"a"}, 1},
		{"a problem without a want", &field.List{Errors: []*field.Error{{Path: "a"}}}, []string{"a"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{TB: t}
			WantPaths(r, tt.err, tt.want...)
			if len(r.errs) != tt.fails {
				t.Errorf("reported %q, want %d failures", r.errs, tt.fails)
			}
		})
	}
}

func TestWantText(t *testing.T) {
	t.Parallel()
	err := errors.New("gpu.sms: want a count, got -1")
	for _, tt := range []struct {
		name  string
		err   error
		wants []string
		ok    bool
	}{
		{"every part", err, []string{"gpu.sms", "got -1"}, true},
		{"one part missing", err, []string{"gpu.sms", "gpu.device"}, false},
		{"no error", nil, []string{"gpu.sms"}, false},
	} {
		r := &recorder{TB: t}
		if ok := WantText(r, tt.err, tt.wants...); ok != tt.ok || (len(r.errs) == 0) != tt.ok {
			t.Errorf("%s: WantText = %v reporting %q, want %v", tt.name, ok, r.errs, tt.ok)
		}
	}
}
