package v1

import (
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Error codes of the NATS API, carried in micro's Nats-Service-Error-Code
// header.
const (
	// CodeBadRequest: the request could not be decoded or is invalid; the
	// description names the field.
	CodeBadRequest = 400
	// CodeForbidden: the lease token is wrong.
	CodeForbidden = 403
	// CodeNotFound: the lease does not exist.
	CodeNotFound = 404
	// CodeConflict: the request conflicts with the sidecar's state.
	CodeConflict = 409
	// CodeTooManyRequests: the launcher sent more requests than its
	// share (nats.limits.tenant_rate); Error.RetryAfter says when to ask
	// again.
	CodeTooManyRequests = 429
	// CodeInternal: anything the sidecar did not classify.
	CodeInternal = 500
	// CodeUnavailable: the sidecar is not ready (daemon, GPU or predictor
	// unhealthy; it admits nothing new), or its queue for the request is
	// full, when Error.RetryAfter is set.
	CodeUnavailable = 503
	// CodeTimeout: the request's deadline (the caller's TimeoutHeader, or
	// the sidecar's admission.decision_timeout) passed before the answer was
	// ready; nothing was granted, and a retry is decided afresh.
	CodeTimeout = 504
)

// ErrNoSidecar means no sidecar answered: nobody listens on the subject (NATS
// "no responders"), or no quote arrived in time. A launcher treats it as "no
// slot", never as a grant.
var ErrNoSidecar = errors.New("no sidecar answered")

// ErrNoAnswer means a request went out and no answer came back (a timeout,
// a lost connection): the sidecar may have acted on it. After an admit, it
// may hold a lease; the same request again, with the same request_id and
// lease token (AdmitRequest.Token, WithToken), returns that decision
// instead of a second lease.
var ErrNoAnswer = errors.New("no answer")

// Error is an error with an API code. Handlers return it to choose the code
// the client sees; the client returns it for an error response, so callers
// can branch with errors.As or [CodeOf].
type Error struct {
	// Code is one of the Code constants (an HTTP-like status).
	Code int
	// Description is a sentence naming what was wrong.
	Description string
	// RetryAfter, for a 429 or a 503 refused for load, is when the sidecar
	// said to ask again (its Retry-After header); 0 when it did not say.
	RetryAfter time.Duration
}

// Error returns the code and the description.
func (e *Error) Error() string {
	return "colocd error " + strconv.Itoa(e.Code) + ": " + e.Description
}

// BadRequest returns a 400 error; desc should name the field.
func BadRequest(desc string) *Error { return &Error{Code: CodeBadRequest, Description: desc} }

// Forbidden returns a 403 error (wrong token).
func Forbidden(desc string) *Error { return &Error{Code: CodeForbidden, Description: desc} }

// NotFound returns a 404 error (no such lease).
func NotFound(desc string) *Error { return &Error{Code: CodeNotFound, Description: desc} }

// Conflict returns a 409 error.
func Conflict(desc string) *Error { return &Error{Code: CodeConflict, Description: desc} }

// Unavailable returns a 503 error (not ready).
func Unavailable(desc string) *Error { return &Error{Code: CodeUnavailable, Description: desc} }

// TooManyRequests returns a 429 error (past the tenant's rate).
func TooManyRequests(desc string) *Error { return &Error{Code: CodeTooManyRequests, Description: desc} }

// Timeout returns a 504 error (the deadline passed; nothing was granted).
func Timeout(desc string) *Error { return &Error{Code: CodeTimeout, Description: desc} }

// CodeOf returns the code of the first *Error in err's chain, 500 for any
// other error, and 0 for nil.
func CodeOf(err error) int {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) && e.Code != 0 {
		return e.Code
	}
	return CodeInternal
}

// wireError turns a handler error into the code and description put into
// micro's error headers. Header values cannot hold line breaks, and micro
// refuses an empty description.
func WireError(err error) (code, desc string) {
	c := CodeOf(err)
	d := err.Error()
	var e *Error
	if errors.As(err, &e) {
		d = e.Description
	}
	d = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, d)
	if strings.TrimSpace(d) == "" {
		d = "error " + strconv.Itoa(c)
	}
	if len(d) > MaxErrorBytes { // a header, inside a message of bounded size
		cut := MaxErrorBytes
		for cut > 0 && !utf8.RuneStart(d[cut]) {
			cut--
		}
		d = d[:cut] + "…"
	}
	return strconv.Itoa(c), d
}

// MaxErrorBytes bounds an error's description on the wire: whatever a
// request made it say (every field it got wrong), the answer fits in a
// message.
const MaxErrorBytes = 4096

// parseWireError builds an *Error from micro's error headers.
func ParseWireError(code, desc string) *Error {
	c, err := strconv.Atoi(strings.TrimSpace(code))
	if err != nil || c <= 0 {
		return &Error{Code: CodeInternal, Description: "invalid error code " + strconv.Quote(code) + ": " + desc}
	}
	return &Error{Code: c, Description: desc}
}
