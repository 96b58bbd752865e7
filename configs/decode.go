package configs

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/colocd/colocd/field"
	"github.com/go-viper/mapstructure/v2"
)

// decodeProblems turns mapstructure's errors, which name the field, into
// problems: name is the key of the innermost field seen so far, settings
// the values decoded.
func decodeProblems(err error, name string, settings map[string]any) []*field.Error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*field.Error
		for _, e := range j.Unwrap() {
			out = append(out, decodeProblems(e, name, settings)...)
		}
		return out
	}
	if de, ok := err.(*mapstructure.DecodeError); ok {
		return decodeProblems(de.Unwrap(), de.Name(), settings)
	}
	if inner := errors.Unwrap(err); inner != nil && name == "" {
		// viper's "decoding failed" wrapper around the field errors
		return decodeProblems(inner, name, settings)
	}
	p := &field.Error{Path: name, Want: want(name), Got: err.Error()}
	if v, ok := lookup(settings, name); ok {
		p.Got = describe(v)
		var ve *valueError
		if errors.As(err, &ve) {
			p.Got += " (" + ve.reason + ")"
		}
	}
	return []*field.Error{p}
}

// valueError says why a value of the right kind is refused.
type valueError struct{ reason string }

func (e *valueError) Error() string { return e.reason }

// lookup finds the value at a key path such as "services[1].slo" in
// decoded settings.
func lookup(settings map[string]any, key string) (any, bool) {
	if key == "" {
		return nil, false
	}
	var cur any = settings
	for part := range strings.SplitSeq(key, ".") {
		name, rest, _ := strings.Cut(part, "[")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
		for rest != "" {
			var idx string
			idx, rest, _ = strings.Cut(rest, "]")
			rest = strings.TrimPrefix(rest, "[")
			list, ok := cur.([]any)
			i, err := strconv.Atoi(idx)
			if !ok || err != nil || i < 0 || i >= len(list) {
				return nil, false
			}
			cur = list[i]
		}
	}
	return cur, true
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case string:
		return quote(v)
	case map[string]any, map[any]any:
		return "a map"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

// want says what a key takes, from its Go type.
func want(key string) string {
	t := keyType(key)
	if t == nil {
		return "a valid configuration"
	}
	switch {
	case t == durationType:
		return "a duration with a unit, such as 90s, 5m or 1h"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "a whole number"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return "a whole number ≥ 0"
	case t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Slice:
		return "a list"
	case t.Kind() == reflect.Struct:
		return "a map of keys"
	}
	return t.String()
}

// keyType returns the Go type of a key path such as "services[1].slo",
// or nil when there is no such key.
func keyType(key string) reflect.Type {
	t := configType
	if key == "" {
		return t
	}
	for part := range strings.SplitSeq(key, ".") {
		name, index, _ := strings.Cut(part, "[")
		if t.Kind() != reflect.Struct {
			return nil
		}
		f, ok := fieldByTag(t, name)
		if !ok {
			return nil
		}
		t = f.Type
		for ; index != ""; _, index, _ = strings.Cut(index, "[") {
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if t.Field(i).IsExported() && strings.EqualFold(t.Field(i).Tag.Get("mapstructure"), tag) {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// strictNumbers refuses the conversions mapstructure's weak typing would
// make silently: a bare number as a duration (nanoseconds), a fraction,
// infinity or a number out of range as an integer, a negative number as an
// unsigned one, and a boolean as a number.
func strictNumbers(from, to reflect.Type, data any) (any, error) {
	if to == durationType {
		if from != durationType && isNumber(from.Kind()) {
			return nil, &valueError{"a number without a unit"}
		}
		return data, nil
	}
	if !isNumber(to.Kind()) {
		return data, nil
	}
	dv := reflect.ValueOf(data)
	switch {
	case from.Kind() == reflect.Bool:
		return nil, &valueError{"a boolean"}
	case isFloat(to.Kind()):
		return data, nil
	case isFloat(from.Kind()):
		f := dv.Float()
		if f != math.Trunc(f) {
			return nil, &valueError{"not a whole number"}
		}
		lo, hi := -math.Ldexp(1, to.Bits()-1), math.Ldexp(1, to.Bits()-1)
		if isUint(to.Kind()) {
			lo, hi = 0, math.Ldexp(1, to.Bits())
		}
		if !(f >= lo && f < hi) {
			return nil, &valueError{"out of range"}
		}
		if isUint(to.Kind()) {
			return uint64(f), nil
		}
		return int64(f), nil
	case isInt(from.Kind()) && isUint(to.Kind()):
		if dv.Int() < 0 {
			return nil, &valueError{"negative"}
		}
	case isUint(from.Kind()) && isInt(to.Kind()):
		if dv.Uint() > math.MaxInt64 || reflect.Zero(to).OverflowInt(int64(dv.Uint())) {
			return nil, &valueError{"out of range"}
		}
	}
	return data, nil
}

func isInt(k reflect.Kind) bool   { return k >= reflect.Int && k <= reflect.Int64 }
func isUint(k reflect.Kind) bool  { return k >= reflect.Uint && k <= reflect.Uintptr }
func isFloat(k reflect.Kind) bool { return k == reflect.Float32 || k == reflect.Float64 }
func isNumber(k reflect.Kind) bool {
	return isInt(k) || isUint(k) || isFloat(k)
}
