package predictor

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is one problem with one field of an input document. Field is a
// path such as "ops[3].dur_us"; Want says what was expected.
type FieldError struct {
	Field string
	Want  string
	Got   string
}

func (e *FieldError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("%s: want %s", e.Field, e.Want)
	}
	return fmt.Sprintf("%s: want %s, got %s", e.Field, e.Want, e.Got)
}

// ValidationError holds every FieldError found in one document, so that a user
// fixes them all in one pass instead of one per run.
type ValidationError struct {
	Doc    string // what was validated, e.g. "profile bert-infer"
	Fields []*FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid %s: ", e.Doc)
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find each FieldError.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Fields))
	for i, f := range e.Fields {
		out[i] = f
	}
	return out
}

// ErrInvalidTrace is wrapped by every error about a trace file that is not a
// usable profiler trace (truncated, not JSON, no GPU kernels).
var ErrInvalidTrace = errors.New("invalid trace")

// fieldChecker collects FieldErrors while a document is walked.
type fieldChecker struct {
	errs []*FieldError
}

func (c *fieldChecker) add(field, want, got string) {
	c.errs = append(c.errs, &FieldError{Field: field, Want: want, Got: got})
}

// nonNegative checks a duration-like value (finite, ≥ 0).
func (c *fieldChecker) nonNegative(field string, v float64) {
	if !(v >= 0) || isInf(v) {
		c.add(field, "a finite number ≥ 0", fmtFloat(v))
	}
}

// MaxDurationUS bounds every duration in an input document (one hour): far
// beyond any kernel, gap or request, and small enough that sums stay finite.
const MaxDurationUS = 3.6e9

// duration checks a time in µs: ≥ 0 and at most MaxDurationUS.
func (c *fieldChecker) duration(field string, v float64) {
	if !(v >= 0 && v <= MaxDurationUS) {
		c.add(field, "a duration ≥ 0 and ≤ 3.6e9 µs (one hour)", fmtFloat(v))
	}
}

// positive checks a value that must be finite and > 0.
func (c *fieldChecker) positive(field string, v float64) {
	if !(v > 0) || isInf(v) {
		c.add(field, "a finite number > 0", fmtFloat(v))
	}
}

// fraction checks a value in [0, 1].
func (c *fieldChecker) fraction(field string, v float64) {
	if !(v >= 0 && v <= 1) {
		c.add(field, "a fraction in [0,1]", fmtFloat(v))
	}
}

func (c *fieldChecker) err(doc string) error {
	if len(c.errs) == 0 {
		return nil
	}
	return &ValidationError{Doc: doc, Fields: c.errs}
}

func isInf(v float64) bool { return v > 1.7976931348623157e308 || v < -1.7976931348623157e308 }

func fmtFloat(v float64) string { return fmt.Sprintf("%g", v) }
