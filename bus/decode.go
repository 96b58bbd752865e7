package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// DecodeAdmitRequest decodes an admit or quote request body. Unknown fields
// are rejected. The error is a 400 *Error naming the field.
func DecodeAdmitRequest(data []byte) (*AdmitRequest, error) {
	var r AdmitRequest
	if err := decodeStrict("admit request", data, &r); err != nil {
		return nil, err
	}
	if bytes.Equal(r.Profile, []byte("null")) {
		r.Profile = nil // "profile": null, as Python and JavaScript clients write "none"
	}
	return &r, nil
}

// DecodeLeaseRef decodes a renew or release request body, like
// [DecodeAdmitRequest].
func DecodeLeaseRef(data []byte) (*LeaseRef, error) {
	var r LeaseRef
	if err := decodeStrict("lease request", data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DecodeRegisterRequest decodes a register request body, like
// [DecodeAdmitRequest].
func DecodeRegisterRequest(data []byte) (*RegisterRequest, error) {
	var r RegisterRequest
	if err := decodeStrict("register request", data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DecodeEvent decodes an event as published on the event stream. Unlike the
// request decoders it ignores unknown fields, so that a launcher keeps
// reading events from a newer sidecar.
func DecodeEvent(data []byte) (*Event, error) {
	var ev Event
	if err := decode("event", data, &ev, false); err != nil {
		return nil, err
	}
	return &ev, nil
}

// decodeEmpty accepts an empty body or an empty JSON object (status).
func decodeEmpty(what string, data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return decodeStrict(what, data, &struct{}{})
}

func decodeStrict(what string, data []byte, v any) error {
	return decode(what, data, v, true)
}

// decode decodes exactly one JSON object into v and returns a 400 *Error
// whose description starts with what and names the offending field.
func decode(what string, data []byte, v any, strict bool) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return BadRequest(what + ": empty body, want a JSON object")
	}
	if trimmed[0] != '{' {
		return BadRequest(what + ": body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return BadRequest(what + ": " + describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest(what + ": trailing data after the JSON object")
	}
	return nil
}

// describeJSONError rewrites encoding/json's errors so that they name the
// JSON field (its full path) and what was expected.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		return fmt.Sprintf("field %q: got %s, want %s", field, typ.Value, jsonKind(typ.Type))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "invalid JSON: unexpected end of input"
	default:
		// Unknown fields ("json: unknown field \"x\"") and the rest.
		return strings.TrimPrefix(err.Error(), "json: ")
	}
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer (" + t.Kind().String() + ")"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		if t.String() == "time.Time" {
			return "an RFC 3339 time string"
		}
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	default:
		return t.String()
	}
}
