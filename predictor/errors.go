package predictor

import (
	"fmt"

	"github.com/colocd/colocd/field"
)

// fieldChecker collects FieldErrors while a document is walked, with the
// checks that predictor documents share.
type fieldChecker struct {
	field.Checker
}

func (c *fieldChecker) add(path, want, got string) { c.Add(path, want, got) }

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

// fraction checks a value in [0, 1].
func (c *fieldChecker) fraction(field string, v float64) {
	if !(v >= 0 && v <= 1) {
		c.add(field, "a fraction in [0,1]", fmtFloat(v))
	}
}

func (c *fieldChecker) err(doc string) error { return c.Err(doc) }

func isInf(v float64) bool { return v > 1.7976931348623157e308 || v < -1.7976931348623157e308 }

func fmtFloat(v float64) string { return fmt.Sprintf("%g", v) }
