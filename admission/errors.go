package admission

import (
	"errors"
	"fmt"

	"github.com/colocd/colocd/predictor"
)

// Sentinel errors callers branch on; the sidecar maps each to a NATS micro
// error code (in parentheses).
var (
	// ErrInvalid: a request or argument is malformed (400). The error is a
	// *ValidationError naming every bad field.
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

// ValidationError names every bad field of one document (a request, the
// configuration): predictor's error of the same name, which also matches
// ErrInvalid with errors.Is; errors.As finds each *predictor.FieldError.
type ValidationError struct {
	predictor.ValidationError
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// fields collects FieldErrors while a document is checked.
type fields struct {
	errs []*predictor.FieldError
}

func (c *fields) add(field, want, got string) {
	c.errs = append(c.errs, &predictor.FieldError{Field: field, Want: want, Got: got})
}

// nested adds the field errors of err (a *predictor.ValidationError) under
// prefix, or err itself as one error of the field prefix.
func (c *fields) nested(prefix string, err error) {
	var ve *predictor.ValidationError
	if errors.As(err, &ve) {
		for _, f := range ve.Fields {
			c.add(prefix+"."+f.Field, f.Want, f.Got)
		}
		return
	}
	c.add(prefix, "a valid value", err.Error())
}

func (c *fields) err(doc string) error {
	if len(c.errs) == 0 {
		return nil
	}
	return &ValidationError{predictor.ValidationError{Doc: doc, Fields: c.errs}}
}
