package admission

import (
	"errors"
	"fmt"

	"github.com/colocd/colocd/field"
)

// Sentinel errors callers branch on; the sidecar maps each to a NATS micro
// error code (in parentheses).
var (
	// ErrInvalid: a request or argument is malformed (400). The error is a
	// *field.List naming every bad field.
	ErrInvalid = errors.New("invalid request")
	// ErrForbidden: the token does not match the lease (403). Nothing changed.
	ErrForbidden = errors.New("wrong lease token")
	// ErrNotFound: no live lease has this id (404); an expired lease is gone.
	ErrNotFound = errors.New("lease not found")
	// ErrConflict: the store's revision moved under us, or a request collides
	// with a lease that exists (409).
	ErrConflict = errors.New("conflict")
	// ErrRequestIDReused: a request_id seen recently came back with different
	// content (409). It wraps ErrConflict.
	ErrRequestIDReused = fmt.Errorf("request_id reused with different content: %w", ErrConflict)
	// ErrUnavailable: the GPU, the MPS daemon, the predictor or the lease
	// store is unhealthy, so no new co-location is admitted (503). The
	// message carries the reason.
	ErrUnavailable = errors.New("admission unavailable")
)

// fields collects FieldErrors while a document is checked.
type fields struct {
	field.Checker
}

func (c *fields) add(path, want, got string) { c.Add(path, want, got) }

// nested adds the field errors of err (a *field.List) under prefix, or
// err itself as one error of the field prefix.
func (c *fields) nested(prefix string, err error) { c.Nested(prefix, err) }

func (c *fields) err(doc string) error { return c.ErrKind(doc, ErrInvalid) }
