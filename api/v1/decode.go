package v1

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/colocd/colocd/internal/strictjson"
)

// DecodeAdmitRequest decodes an admit or quote request body. Unknown fields
// are rejected. The error is a 400 *Error naming the field.
func DecodeAdmitRequest(data []byte) (*AdmitRequest, error) {
	r, err := decodeStrictNew[AdmitRequest]("admit request", data)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(r.Profile, []byte("null")) {
		r.Profile = nil // "profile": null, as Python and JavaScript clients write "none"
	}
	if err := r.CheckShape(); err != nil {
		return nil, err
	}
	return r, nil
}

// CheckShape checks what the wire alone says of an admit or quote request,
// the one place it is checked: a profile inline or by reference, not both
// and not neither, and the reference and the token digest well formed.
// Whether the request fits the GPU is the decision's to say. The error is a
// 400 naming the field.
func (r *AdmitRequest) CheckShape() error {
	inline := len(r.Profile) > 0
	switch {
	case inline && r.ProfileRef != "":
		return BadRequest("profile, profile_ref: want one of the two, got both")
	case !inline && r.ProfileRef == "":
		return BadRequest("profile: want an inline colocd.profile/v1 training profile, or a profile_ref")
	case r.ProfileRef != "":
		if _, err := ParseProfileRef(r.ProfileRef); err != nil {
			return BadRequest(err.Error())
		}
	}
	if r.TokenSHA256 != "" { // the decision requires one for an admit, not for a quote
		if _, err := ParseTokenSHA256(r.TokenSHA256); err != nil {
			return BadRequest(err.Error())
		}
	}
	return nil
}

// DecodeLeaseRef decodes a renew or release request body, like
// [DecodeAdmitRequest].
func DecodeLeaseRef(data []byte) (*LeaseRef, error) {
	return decodeStrictNew[LeaseRef]("lease request", data)
}

// DecodeRegisterRequest decodes a register request body, like
// [DecodeAdmitRequest].
func DecodeRegisterRequest(data []byte) (*RegisterRequest, error) {
	return decodeStrictNew[RegisterRequest]("register request", data)
}

// DecodeEvent decodes an event as published on the event stream. Unlike the
// request decoders it ignores unknown fields, so that a launcher keeps
// reading events from a newer sidecar.
func DecodeEvent(data []byte) (*Event, error) {
	var ev Event
	if err := decode("event", data, &ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// decodeEmpty accepts an empty body or an empty JSON object (status).
func DecodeEmpty(what string, data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return DecodeStrict(what, data, &struct{}{})
}

// decodeStrictNew decodes data into a new T, like decodeStrict.
func decodeStrictNew[T any](what string, data []byte) (*T, error) {
	var r T
	if err := DecodeStrict(what, data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown,
// case-differing and repeated keys; the error is a 400 *Error whose
// description names every offending field.
func DecodeStrict(what string, data []byte, v any) error {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] != '{' {
		return BadRequest(what + ": body must be a JSON object")
	}
	if err := strictjson.Decode(what, data, v); err != nil {
		return BadRequest(err.Error())
	}
	return nil
}

// decode decodes one JSON object into v, ignoring unknown fields (events,
// which a newer sidecar may extend); the error is a 400 *Error.
func decode(what string, data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return BadRequest(what + ": body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		return BadRequest(what + ": " + strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest(what + ": trailing data after the JSON object")
	}
	return nil
}
