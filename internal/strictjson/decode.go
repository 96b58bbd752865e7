// Package strictjson decodes one JSON document into a Go value and refuses
// what encoding/json lets through: unknown keys, keys that match a field
// only when case is ignored ("MEMORY_MIB" for memory_mib), a key given twice
// in one object, and data after the document. It reports every problem at
// once as a *field.List whose entries name the key path and the line.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/colocd/colocd/internal/field"
)

// MaxErrors bounds the problems one document reports: enough to fix a file
// in one pass, and a hostile document cannot make a huge error.
const MaxErrors = 20

// Decode decodes data into v, a non-nil pointer, or returns a *field.List
// about doc (e.g. "profile", "admit request") naming each bad key. v is left
// unchanged when there is any problem.
func Decode(doc string, data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("decode %s: want a non-nil pointer, got %T", doc, v)
	}
	w := walker{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	err := w.value(rv.Type().Elem(), "")
	if err == nil && len(w.errs) < MaxErrors {
		if _, terr := w.dec.Token(); !errors.Is(terr, io.EOF) {
			w.add("", "one JSON document", "more data after it")
		}
	}
	if err != nil && len(w.errs) < MaxErrors {
		w.syntax(err)
	}
	if len(w.errs) > 0 {
		return &field.List{Doc: doc, Errors: w.errs}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil { // what the walk cannot see: a number out of range, a bad time
		e := &field.Error{Want: "a valid value", Got: strings.TrimPrefix(err.Error(), "json: ")}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			e.Path, e.Want, e.Got = te.Field, kindName(te.Type), "a JSON "+te.Value
			e.Line = lineAt(data, te.Offset)
		}
		return &field.List{Doc: doc, Errors: []*field.Error{e}}
	}
	return nil
}

// errStop ends the walk once MaxErrors problems are recorded.
var errStop = errors.New("too many problems")

type walker struct {
	data []byte
	dec  *json.Decoder
	errs []*field.Error
}

func (w *walker) add(path, want, got string) {
	w.addAt(path, want, got, w.dec.InputOffset())
}

func (w *walker) addAt(path, want, got string, off int64) {
	if len(w.errs) >= MaxErrors {
		return
	}
	w.errs = append(w.errs, &field.Error{Path: path, Want: want, Got: got, Line: lineAt(w.data, off)})
}

func (w *walker) full() error {
	if len(w.errs) >= MaxErrors {
		return errStop
	}
	return nil
}

// syntax records a decoder error: bad JSON or a document cut short.
func (w *walker) syntax(err error) {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, errStop):
	case errors.As(err, &se):
		w.addAt("", "valid JSON", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(w.data)) == 0 {
			w.addAt("", "a JSON document", "nothing", 0)
		} else {
			w.add("", "a complete JSON document", "its end cut off")
		}
	default:
		w.add("", "valid JSON", err.Error())
	}
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawType             = reflect.TypeFor[json.RawMessage]()
)

// opaque types decode themselves: the walk checks only duplicate keys below them.
func opaque(t reflect.Type) bool {
	if t == nil || t.Kind() == reflect.Interface || t == rawType {
		return true
	}
	pt := reflect.PointerTo(t)
	return t.Implements(unmarshalerType) || pt.Implements(unmarshalerType)
}

// value reads one value meant for a t (nil: anything) at path.
func (w *walker) value(t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	off := w.dec.InputOffset() // the token's end: its line
	if tok == nil {            // null: encoding/json leaves the value as it was
		return nil
	}
	if d, ok := tok.(json.Delim); ok {
		switch {
		case d == '{' && (opaque(t) || t.Kind() == reflect.Map || t.Kind() == reflect.Struct):
			return w.object(t, path)
		case d == '[' && (opaque(t) || t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			var elem reflect.Type
			if !opaque(t) {
				elem = t.Elem()
			}
			return w.array(elem, path)
		}
		w.addAt(path, kindName(t), map[json.Delim]string{'{': "an object", '[': "an array"}[d], off)
		return w.skip(d)
	}
	if opaque(t) {
		return nil
	}
	if want, ok := scalarFits(t, tok); !ok {
		w.addAt(path, want, describe(tok), off)
	}
	return w.full()
}

// object reads the members of an object for a struct, a map or anything.
func (w *walker) object(t reflect.Type, path string) error {
	var fields map[string]reflect.Type
	var folded map[string]string
	if t != nil && !opaque(t) && t.Kind() == reflect.Struct {
		fields, folded = structFields(t)
	}
	seen := map[string]int64{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		off := w.dec.InputOffset()
		key, _ := tok.(string)
		at := field.Join(path, key)
		if first, dup := seen[key]; dup {
			again := "it again"
			if l := lineAt(w.data, first); l > 0 {
				again = fmt.Sprintf("it again (first on line %d)", l)
			}
			w.addAt(at, "each key once per object", again, off)
		} else {
			seen[key] = off
		}
		var elem reflect.Type
		switch {
		case fields != nil:
			ft, ok := fields[key]
			if !ok {
				if exact, near := folded[strings.ToLower(key)]; near {
					w.addAt(at, fmt.Sprintf("the key %q (keys are case-sensitive)", exact), fmt.Sprintf("%q", key), off)
				} else {
					w.addAt(at, "a known key", "an unknown key", off)
				}
			}
			elem = ft
			if !ok {
				if err := w.value(nil, at); err != nil {
					return err
				}
				continue
			}
		case t != nil && !opaque(t):
			elem = t.Elem()
		}
		if err := w.value(elem, at); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	if err != nil {
		return err
	}
	return w.full()
}

func (w *walker) array(elem reflect.Type, path string) error {
	for i := 0; w.dec.More(); i++ {
		if err := w.value(elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // ']'
	return err
}

// skip consumes the rest of a composite value that has the wrong type.
func (w *walker) skip(open json.Delim) error {
	depth := 1
	for depth > 0 {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return w.full()
}

// structFields maps a struct's JSON keys to their types (embedded structs'
// keys included, as encoding/json flattens them), and the lowercased keys
// to the exact ones.
func structFields(t reflect.Type) (map[string]reflect.Type, map[string]string) {
	if c, ok := fieldCache.Load(t); ok {
		e := c.(fieldEntry)
		return e.exact, e.folded
	}
	e := fieldEntry{exact: map[string]reflect.Type{}, folded: map[string]string{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					add(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			e.exact[name] = f.Type
			e.folded[strings.ToLower(name)] = name
		}
	}
	add(t)
	fieldCache.Store(t, e)
	return e.exact, e.folded
}

type fieldEntry struct {
	exact  map[string]reflect.Type
	folded map[string]string
}

var fieldCache sync.Map // reflect.Type → fieldEntry

// scalarFits says whether a scalar token decodes into t, and if not what t wants.
func scalarFits(t reflect.Type, tok json.Token) (string, bool) {
	want := kindName(t)
	switch t.Kind() {
	case reflect.String:
		_, ok := tok.(string)
		return want, ok
	case reflect.Bool:
		_, ok := tok.(bool)
		return want, ok
	case reflect.Float32, reflect.Float64:
		_, ok := tok.(json.Number)
		return want, ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return want, false
		}
		_, err := strconv.ParseInt(string(n), 10, t.Bits())
		return want, err == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			return want, false
		}
		_, err := strconv.ParseUint(string(n), 10, t.Bits())
		return want, err == nil
	case reflect.Slice: // []byte: a base64 string
		_, ok := tok.(string)
		return want, ok && t.Elem().Kind() == reflect.Uint8
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		_, ok := tok.(string)
		return want, ok
	}
	return want, false
}

// kindName says what JSON a Go type decodes from.
func kindName(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number ≥ 0"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Struct:
		if t.String() == "time.Time" {
			return "an RFC 3339 time string"
		}
		return "an object"
	case reflect.Map:
		return "an object"
	}
	return "a value"
}

// describe names a scalar token for a message, briefly.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case string:
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return fmt.Sprintf("the string %q", v)
	case json.Number:
		return "the number " + string(v)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(tok)
}

// lineAt is the 1-based line of byte offset off, or 0 in a document of
// one line (a NATS request), where a line says nothing.
func lineAt(data []byte, off int64) int {
	if bytes.IndexByte(data, '\n') < 0 {
		return 0
	}
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}
