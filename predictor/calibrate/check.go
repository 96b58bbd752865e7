package calibrate

import (
	"fmt"

	"github.com/colocd/colocd/field"
)

// checker collects the problems of a measurements document; it adds the
// package's number checks to field.Checker, whose Add and Err it uses.
type checker struct {
	field.Checker
}

// positive checks a value that must be finite and > 0.
func (c *checker) positive(path string, v float64) {
	if !(v > 0 && v <= 1.7976931348623157e308) {
		c.Add(path, "a finite number > 0", fmtFloat(v))
	}
}

func fmtFloat(v float64) string { return fmt.Sprintf("%g", v) }
