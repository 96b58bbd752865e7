// Package strictjson decodes one JSON document into a Go value and refuses
// what encoding/json lets through: unknown keys, keys that match a field
// only when case is ignored ("MEMORY_MIB" for memory_mib), a key given twice
// in one object, and data after the document. It reports every problem at
// once (up to MaxErrors) as a *field.List whose entries name the key path
// and, in a document of several lines, the line.
//
// It scans the document once itself, along the target type, in time linear
// in its size and bounded in depth; only a document without problems is then
// decoded by encoding/json, into a fresh value that replaces *v.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/colocd/colocd/field"
)

const (
	// MaxErrors bounds the problems one document reports: enough to fix a
	// file in one pass, and a hostile document cannot make a huge error.
	MaxErrors = 20
	// MaxDepth bounds the nesting of objects and arrays, far beyond any
	// colocd document (a profile nests four deep).
	MaxDepth = 100
	// maxPathKey bounds how much of one key a path repeats.
	maxPathKey = 40
)

// Decode decodes data into v, a non-nil pointer, or returns a *field.List
// about doc (e.g. "profile", "admit request") naming each problem. v is
// left unchanged when there is any problem.
func Decode(doc string, data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("decode %s: want a non-nil pointer, got %T", doc, v)
	}
	elem := rv.Type().Elem()
	s := scanner{data: data, multiline: bytes.IndexByte(data, '\n') >= 0}
	s.skipWS()
	if s.pos == len(data) {
		s.addAt(0, "a JSON document", "nothing")
	} else if err := s.value(elem); err == nil {
		if s.skipWS(); s.pos < len(data) {
			s.addAt(s.pos, "one JSON document", "more data after it")
		}
	}
	if len(s.errs) > 0 {
		return &field.List{Doc: doc, Errors: s.errs}
	}
	// The scan refused every key the type does not have, so a plain
	// Unmarshal (faster than a Decoder) is as strict here.
	fresh := reflect.New(elem)
	if err := json.Unmarshal(data, fresh.Interface()); err != nil { // what the scan cannot see
		e := &field.Error{Want: "a valid value", Got: strings.TrimPrefix(err.Error(), "json: ")}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			e.Path, e.Want, e.Got = te.Field, kindName(te.Type), "a JSON "+te.Value
			e.Line = s.lineAt(int(te.Offset))
		}
		return &field.List{Doc: doc, Errors: []*field.Error{e}}
	}
	rv.Elem().Set(fresh.Elem())
	return nil
}

// errStop ends the scan: MaxErrors problems are recorded, or the document
// is not JSON past this point.
var errStop = errors.New("stop")

type scanner struct {
	data      []byte
	pos       int
	multiline bool
	path      []seg
	levels    []*level // per depth, reused by the objects at that depth
	errs      []*field.Error
	classes   map[reflect.Type]class
}

// class is what the scan needs to know of a target type, found once.
type class struct {
	t           reflect.Type // pointers removed; nil: any value
	unmarshaler bool         // t decodes itself (UnmarshalJSON)
}

func classify(t reflect.Type) class {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface || t == rawType || t == numberType {
		return class{}
	}
	return class{t: t, unmarshaler: t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)}
}

// seg is one step of the current key path: a key (its bytes in data) or an
// array index.
type seg struct {
	key     []byte // as written, between the quotes
	escaped bool
	idx     int
	isIndex bool
}

// level is one object's record of the keys it has seen, reused by the next
// object at the same depth.
type level struct {
	fieldAt []int          // struct: by field, the offset of its key, or -1
	keys    map[string]int // map or any value: key → offset of its first use
}

func (s *scanner) addAt(off int, want, got string) {
	if len(s.errs) >= MaxErrors {
		return
	}
	s.errs = append(s.errs, &field.Error{Path: s.pathString(), Want: want, Got: got, Line: s.lineAt(off)})
}

// full reports errStop once MaxErrors problems are recorded.
func (s *scanner) full() error {
	if len(s.errs) >= MaxErrors {
		return errStop
	}
	return nil
}

// syntax records that the document is not JSON at the current position.
func (s *scanner) syntax(want string) error {
	got := "the end of the document (cut off)"
	if s.pos < len(s.data) {
		got = fmt.Sprintf("%q", s.data[s.pos:s.pos+1])
	}
	s.addAt(s.pos, "valid JSON: "+want, got)
	return errStop
}

// lineAt is the 1-based line of offset off, or 0 in a document of one line
// (a NATS request), where a line says nothing.
func (s *scanner) lineAt(off int) int {
	if !s.multiline {
		return 0
	}
	off = min(max(off, 0), len(s.data))
	return bytes.Count(s.data[:off], []byte{'\n'}) + 1
}

// maxPath bounds a path in a message: its start and end, with "…" for the
// middle of a deeper one.
const maxPath = 120

func (s *scanner) pathString() string {
	p := s.fullPath()
	if len(p) > maxPath {
		p = p[:maxPath/2] + "…" + p[len(p)-maxPath/2:]
	}
	return p
}

func (s *scanner) fullPath() string {
	var b strings.Builder
	for _, p := range s.path {
		if p.isIndex {
			fmt.Fprintf(&b, "[%d]", p.idx)
			continue
		}
		k := unescape(p.key, p.escaped)
		if len(k) > maxPathKey {
			k = k[:maxPathKey] + "…"
		}
		if simpleKey(k) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		} else {
			fmt.Fprintf(&b, "[%q]", k)
		}
	}
	return b.String()
}

// simpleKey: a key that reads unambiguously in a dotted path.
func simpleKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func (s *scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawType             = reflect.TypeFor[json.RawMessage]()
	numberType          = reflect.TypeFor[json.Number]()
)

// value scans one value meant for a t; nil t takes any value (an interface,
// raw JSON, a quoted field: only syntax and repeated keys are checked).
func (s *scanner) value(t reflect.Type) error {
	if t != nil {
		c, ok := s.classes[t]
		if !ok {
			c = classify(t)
			if s.classes == nil {
				s.classes = map[reflect.Type]class{}
			}
			s.classes[t] = c
		}
		if t = c.t; c.unmarshaler {
			return s.unmarshaler(t)
		}
	}
	s.skipWS()
	if s.pos == len(s.data) {
		return s.syntax("a value")
	}
	start := s.pos
	switch c := s.data[s.pos]; {
	case c == '{':
		if t != nil && t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
			s.addAt(start, kindName(t), "an object")
			t = nil
		}
		return s.object(t)
	case c == '[':
		var elem reflect.Type
		switch {
		case t == nil:
		case t.Kind() == reflect.Slice, t.Kind() == reflect.Array:
			elem = t.Elem()
		default:
			s.addAt(start, kindName(t), "an array")
		}
		return s.array(elem)
	case c == '"':
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		if t != nil && !stringFits(t) {
			s.addAt(start, kindName(t), "the string "+quote(unescape(raw, escaped)))
		}
	case c == 't' || c == 'f' || c == 'n':
		lit, err := s.literal()
		if err != nil {
			return err
		}
		if t != nil && lit != "null" && t.Kind() != reflect.Bool {
			s.addAt(start, kindName(t), lit)
		}
	default:
		num, err := s.number()
		if err != nil {
			return err
		}
		if t != nil {
			if want, ok := numberFits(t, num); !ok {
				s.addAt(start, want, "the number "+string(num))
			}
		}
	}
	return s.full()
}

// unmarshaler scans a value of a type that decodes itself, then has it
// decode the value, so that its problems are named at this path.
func (s *scanner) unmarshaler(t reflect.Type) error {
	s.skipWS()
	start := s.pos
	if err := s.value(nil); err != nil {
		return err
	}
	raw := s.data[start:s.pos]
	if string(raw) == "null" {
		return nil
	}
	err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw)
	if err == nil {
		return nil
	}
	var l *field.List
	if !errors.As(err, &l) {
		s.addAt(start, "a valid value", strings.TrimPrefix(err.Error(), "json: "))
		return s.full()
	}
	at, line := s.pathString(), s.lineAt(start)
	for _, e := range l.Errors {
		if len(s.errs) >= MaxErrors {
			break
		}
		n := *e
		n.Path = field.Join(at, e.Path)
		switch {
		case e.Line > 0:
			n.Line = line + e.Line - 1
		default:
			n.Line = line
		}
		s.errs = append(s.errs, &n)
	}
	return s.full()
}

// object scans an object for a struct, a map or (nil) anything.
func (s *scanner) object(t reflect.Type) error {
	if err := s.enter(); err != nil {
		return err
	}
	var info *structInfo
	if t != nil && t.Kind() == reflect.Struct {
		info = fieldsOf(t)
	}
	lvl := s.level(info)
	for empty := s.opened('}'); !empty; {
		s.skipWS()
		if s.pos == len(s.data) || s.data[s.pos] != '"' {
			return s.syntax("a key in double quotes")
		}
		keyAt := s.pos
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		s.path = append(s.path, seg{key: raw, escaped: escaped})
		elem, err := s.member(t, info, lvl, raw, escaped, keyAt)
		if err == nil {
			s.skipWS()
			if s.pos == len(s.data) || s.data[s.pos] != ':' {
				err = s.syntax("':' after the key")
			} else {
				s.pos++
				err = s.value(elem)
			}
		}
		if more, err := s.leave(err, '}'); !more {
			return err
		}
	}
	return nil
}

// enter refuses nesting deeper than MaxDepth.
func (s *scanner) enter() error {
	if len(s.path) >= MaxDepth {
		s.addAt(s.pos, fmt.Sprintf("objects and arrays nested at most %d deep", MaxDepth), "deeper nesting")
		return errStop
	}
	return nil
}

// opened takes the opening '{' or '[' and reports whether end closes the
// object or array at once.
func (s *scanner) opened(end byte) bool {
	s.pos++
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == end {
		s.pos++
		return true
	}
	return false
}

// leave ends a member or an element whose scan returned err: its segment
// leaves the path and, unless the scan failed, after reads what follows.
func (s *scanner) leave(err error, end byte) (more bool, _ error) {
	s.path = s.path[:len(s.path)-1]
	if err != nil {
		return false, err
	}
	return s.after(end)
}

// after takes what follows a member or element: a ',' (more follow) or
// end (the object or array is done).
func (s *scanner) after(end byte) (more bool, err error) {
	s.skipWS()
	if s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ',':
			s.pos++
			return true, nil
		case end:
			s.pos++
			return false, s.full()
		}
	}
	return false, s.syntax(fmt.Sprintf("',' or '%c' after a value", end))
}

// member checks one key of an object and returns the type its value is for.
func (s *scanner) member(t reflect.Type, info *structInfo, lvl *level, raw []byte, escaped bool, keyAt int) (reflect.Type, error) {
	if info != nil {
		var i int
		var ok bool
		if escaped {
			i, ok = info.index[unescape(raw, true)]
		} else {
			i, ok = info.index[string(raw)] // no copy for a map lookup
		}
		switch {
		case ok && lvl.fieldAt[i] >= 0:
			s.addAt(keyAt, "each key once per object", again(s.lineAt(lvl.fieldAt[i])))
			return info.fields[i].typ, s.full()
		case ok:
			lvl.fieldAt[i] = keyAt
			return info.fields[i].typ, nil
		}
		key := unescape(raw, escaped)
		if exact, near := info.folded[strings.ToLower(key)]; near {
			s.addAt(keyAt, fmt.Sprintf("the key %q (keys are case-sensitive)", exact), quote(key))
		} else {
			s.addAt(keyAt, "a known key", "an unknown key")
		}
		return nil, s.full()
	}
	key := unescape(raw, escaped)
	norm := key
	var elem reflect.Type
	if t != nil { // a map
		elem = t.Elem()
		var ok bool
		if norm, ok = mapKey(t.Key(), key); !ok {
			s.addAt(keyAt, "a key that is "+kindName(t.Key()), quote(key))
			return elem, s.full()
		}
	}
	if first, dup := lvl.keys[norm]; dup {
		s.addAt(keyAt, "each key once per object", again(s.lineAt(first)))
		return elem, s.full()
	}
	lvl.keys[norm] = keyAt
	return elem, nil
}

func again(firstLine int) string {
	if firstLine > 0 {
		return fmt.Sprintf("it again (first on line %d)", firstLine)
	}
	return "it again"
}

// mapKey is the key a map of key type kt stores for key: integer keys are
// compared as numbers ("1" and "01" are one key), like encoding/json stores
// them.
func mapKey(kt reflect.Type, key string) (string, bool) {
	if reflect.PointerTo(kt).Implements(textUnmarshalerType) {
		return key, true
	}
	switch kt.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(key, 10, kt.Bits())
		return strconv.FormatInt(n, 10), err == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(key, 10, kt.Bits())
		return strconv.FormatUint(n, 10), err == nil
	}
	return key, true
}

// level returns the key record for an object at the current depth, empty.
func (s *scanner) level(info *structInfo) *level {
	d := len(s.path)
	for len(s.levels) <= d {
		s.levels = append(s.levels, &level{})
	}
	l := s.levels[d]
	if info != nil {
		if cap(l.fieldAt) < len(info.fields) {
			l.fieldAt = make([]int, len(info.fields))
		}
		l.fieldAt = l.fieldAt[:len(info.fields)]
		for i := range l.fieldAt {
			l.fieldAt[i] = -1
		}
		return l
	}
	if l.keys == nil {
		l.keys = map[string]int{}
	}
	clear(l.keys)
	return l
}

// array scans an array whose elements are for elem (nil: anything).
func (s *scanner) array(elem reflect.Type) error {
	if err := s.enter(); err != nil {
		return err
	}
	for i, empty := 0, s.opened(']'); !empty; i++ {
		s.path = append(s.path, seg{idx: i, isIndex: true})
		err := s.value(elem)
		if more, err := s.leave(err, ']'); !more {
			return err
		}
	}
	return nil
}

// str scans a string and returns its bytes between the quotes.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	start := s.pos + 1
	for s.pos = start; s.pos < len(s.data); s.pos++ {
		switch c := s.data[s.pos]; {
		case c == '"':
			s.pos++
			return s.data[start : s.pos-1], escaped, nil
		case c == '\\':
			escaped = true
			s.pos++
			if s.pos == len(s.data) {
				return nil, false, s.syntax("an escape sequence")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.pos+4 >= len(s.data) || !isHex4(s.data[s.pos+1:s.pos+5]) {
					return nil, false, s.syntax(`four hex digits after \u`)
				}
				s.pos += 4
			default:
				return nil, false, s.syntax("an escape sequence")
			}
		case c < 0x20:
			return nil, false, s.syntax("no control character inside a string")
		}
	}
	return nil, false, s.syntax(`'"' to end the string`)
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// unescape returns a string's value as encoding/json decodes it.
func unescape(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	var v string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	if json.Unmarshal(q, &v) != nil {
		return string(raw) // str checked the escapes; not reached
	}
	return v
}

func (s *scanner) literal() (string, error) {
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
			s.pos += len(lit)
			return lit, nil
		}
	}
	return "", s.syntax("a value")
}

// number scans a number by JSON's grammar and returns its text.
func (s *scanner) number() ([]byte, error) {
	start := s.pos
	digits := func() int {
		n := 0
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.pos < len(s.data) && s.data[s.pos] == '-' {
		s.pos++
	}
	intStart := s.pos
	if n := digits(); n == 0 || n > 1 && s.data[intStart] == '0' {
		s.pos = intStart
		return nil, s.syntax("a value")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return nil, s.syntax("digits after the decimal point")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return nil, s.syntax("digits in the exponent")
		}
	}
	return s.data[start:s.pos], nil
}

// stringFits: a JSON string decodes into t.
func stringFits(t reflect.Type) bool {
	switch {
	case t.Kind() == reflect.String:
		return true
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8: // base64
		return true
	}
	return reflect.PointerTo(t).Implements(textUnmarshalerType)
}

// numberFits says whether the number num decodes into t, and if not what t wants.
func numberFits(t reflect.Type, num []byte) (string, bool) {
	var err error
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		if _, err = strconv.ParseFloat(string(num), t.Bits()); err != nil {
			return fmt.Sprintf("a number within float%d range", t.Bits()), false
		}
		return "", true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err = strconv.ParseInt(string(num), 10, t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		_, err = strconv.ParseUint(string(num), 10, t.Bits())
	default:
		return kindName(t), false
	}
	if err != nil {
		return kindName(t), false
	}
	return "", true
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

// quote quotes s for a message, briefly.
func quote(s string) string {
	if len(s) > maxPathKey {
		s = s[:maxPathKey] + "…"
	}
	return strconv.Quote(s)
}
