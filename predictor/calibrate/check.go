package calibrate

import (
	"fmt"

	"github.com/colocd/colocd/field"
)

// checker collects the problems of a measurements document.
type checker struct {
	field.Checker
}

func (c *checker) add(path, want, got string) { c.Add(path, want, got) }

// positive checks a value that must be finite and > 0.
func (c *checker) positive(path string, v float64) {
	if !(v > 0 && v <= 1.7976931348623157e308) {
		c.add(path, "a finite number > 0", fmtFloat(v))
	}
}

func (c *checker) err(doc string) error { return c.Err(doc) }

func fmtFloat(v float64) string { return fmt.Sprintf("%g", v) }
