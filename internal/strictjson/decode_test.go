package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/field"
)

type inner struct {
	SM   float64  `json:"sm"`
	DRAM *float64 `json:"dram,omitempty"`
}

type Embedded struct {
	Extra string `json:"extra"`
}

type doc struct {
	Embedded
	Name      string            `json:"name"`
	MemoryMiB int               `json:"memory_mib"`
	Ops       []inner           `json:"ops"`
	Labels    map[string]string `json:"labels"`
	Raw       json.RawMessage   `json:"raw"`
	At        time.Time         `json:"at"`
	Skip      string            `json:"-"`
	Any       any               `json:"any"`
}

func TestDecodeAccepts(t *testing.T) {
	t.Parallel()
	in := `{"name": "a", "memory_mib": 5, "ops": [{"sm": 0.5, "dram": null}], "labels": {"x": "y"},
	"raw": {"A": 1, "a": 2}, "at": "2026-01-01T00:00:00Z", "extra": "e", "any": [1, {"k": true}]}`
	var d doc
	if err := Decode("doc", []byte(in), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "a" || d.MemoryMiB != 5 || len(d.Ops) != 1 || d.Ops[0].SM != 0.5 || d.Extra != "e" || d.Labels["x"] != "y" {
		t.Errorf("decoded %+v", d)
	}
}

// TestDecodeRefuses: each problem is named by its key path and line, and
// every one of them is reported at once.
func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     []string // "line:path:fragment of want or got"
	}{
		{"case-differing key", `{"MEMORY_MIB": 5}`, []string{`1:MEMORY_MIB:"memory_mib"`}},
		{"duplicate key", "{\"name\": \"a\",\n \"name\": \"b\"}", []string{"2:name:first on line 1"}},
		{"duplicate key in a map", `{"labels": {"x": "1", "x": "2"}}`, []string{"1:labels.x:once"}},
		{"duplicate key under raw", `{"raw": {"k": 1, "k": 2}}`, []string{"1:raw.k:once"}},
		{"unknown key", `{"nmae": "a"}`, []string{"1:nmae:unknown"}},
		{"dash field is unknown", `{"Skip": "x"}`, []string{"1:Skip:unknown"}},
		{"wrong scalar", `{"memory_mib": "5"}`, []string{"1:memory_mib:a whole number"}},
		{"fraction for an int", `{"memory_mib": 1.5}`, []string{"1:memory_mib:whole"}},
		{"object for a string", `{"name": {"x": 1}, "memory_mib": 2}`, []string{"1:name:a string"}},
		{"deep path", "{\"ops\": [{\"sm\": 1},\n {\"sm\": \"x\", \"SM\": 2}]}", []string{"2:ops[1].sm:a number", `2:ops[1].SM:"sm"`}},
		{"trailing data", `{"name": "a"} {}`, []string{"1::more data"}},
		{"syntax", "{\"name\": \"a\",\n ]", []string{"2::valid JSON: a key"}},
		{"truncated", `{"name": `, []string{":name:cut off"}},
		{"empty", ``, []string{"1::nothing"}},
		{"not an object", `[1]`, []string{"1::an object"}},
		{"all at once", `{"MEMORY_MIB": 1, "nmae": 2, "ops": 3}`, []string{"1:MEMORY_MIB:", "1:nmae:", "1:ops:an array"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			err := Decode("doc", []byte(tt.in), &d)
			var l *field.List
			if !errors.As(err, &l) {
				t.Fatalf("got %v, want a *field.List", err)
			}
			if len(l.Errors) != len(tt.want) {
				t.Fatalf("%d problems, want %d: %v", len(l.Errors), len(tt.want), err)
			}
			for i, w := range tt.want {
				parts := strings.SplitN(w, ":", 3)
				if !strings.Contains(tt.in, "\n") && parts[0] != "" {
					parts[0] = "0" // a document of one line has no line numbers
				}
				e := l.Errors[i]
				if (parts[0] != "" && parts[0] != strconv.Itoa(e.Line)) || e.Path != parts[1] || !strings.Contains(e.Want+" "+e.Got, parts[2]) {
					t.Errorf("problem %d: line %d %q want %q got %q; want %s", i, e.Line, e.Path, e.Want, e.Got, w)
				}
			}
			if d.Name != "" || d.MemoryMiB != 0 {
				t.Errorf("the value changed on error: %+v", d)
			}
		})
	}
}

// TestDecodeBoundsErrors: a document of a thousand bad keys reports MaxErrors.
func TestDecodeBoundsErrors(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("{")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `": 1`)
	}
	b.WriteString("}")
	var d doc
	var l *field.List
	if err := Decode("doc", []byte(b.String()), &d); !errors.As(err, &l) || len(l.Errors) != MaxErrors {
		t.Fatalf("got %v", err)
	}
}

func TestDecodeWantsAPointer(t *testing.T) {
	t.Parallel()
	if err := Decode("doc", []byte(`{}`), doc{}); err == nil {
		t.Fatal("no error for a non-pointer")
	}
}

// TestDecodeBoundsWork: hostile shapes end fast with a bounded answer:
// nesting past MaxDepth, and a one-line document of repeated keys.
func TestDecodeBoundsWork(t *testing.T) {
	t.Parallel()
	deep := `{"raw":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`
	var d doc
	var l *field.List
	if err := Decode("doc", []byte(deep), &d); !errors.As(err, &l) || len(l.Errors) != 1 || !strings.Contains(l.Errors[0].Want, "nested at most") {
		t.Fatalf("deep nesting: %v", err)
	}
	if p := l.Errors[0].Path; len(p) > maxPath+len("…") || !strings.HasPrefix(p, "raw[0]") {
		t.Errorf("the path of a deep problem is %d bytes: %.80s…", len(p), p)
	}
	dups := `{"name":null` + strings.Repeat(`,"name":null`, 200_000) + `}`
	if err := Decode("doc", []byte(dups), &d); !errors.As(err, &l) || len(l.Errors) != MaxErrors {
		t.Fatalf("repeated keys: %v", err)
	}
}

type inner2 struct {
	X int `json:"x"`
}

type withRules struct {
	Y      string `json:"y"`
	inner2        // promoted: key x
	N      int    `json:"n,string"`
	Num    json.Number
	ByInt  map[int]string `json:"by_int"`
	Self   *selfRef       `json:"self"`
	Sub    *subDoc        `json:"sub"`
}

type selfRef struct {
	*selfRef     //lint:ignore U1000 a type that embeds itself, which the field walk must visit once
	V        int `json:"v"`
}

// subDoc decodes itself with Decode, as a profile inside measurements does.
type subDoc struct{ Name string }

func (s *subDoc) UnmarshalJSON(b []byte) error {
	var v struct {
		Name string `json:"name"`
	}
	if err := Decode("sub document", b, &v); err != nil {
		return err
	}
	s.Name = v.Name
	return nil
}

// TestDecodeFollowsEncodingJSON: promoted, quoted and json.Number fields,
// integer map keys, a type that embeds itself, and a type that decodes
// itself are read as encoding/json reads them.
func TestDecodeFollowsEncodingJSON(t *testing.T) {
	t.Parallel()
	var w withRules
	in := `{"y":"a","x":3,"n":"5","Num":12.5,"by_int":{"1":"a","2":"b"},"self":{"v":1},"sub":{"name":"s"}}`
	if err := Decode("doc", []byte(in), &w); err != nil {
		t.Fatal(err)
	}
	if w.X != 3 || w.N != 5 || w.Num != "12.5" || w.ByInt[2] != "b" || w.Self.V != 1 || w.Sub.Name != "s" {
		t.Errorf("decoded %+v", w)
	}
	tests := []struct{ name, in, path, frag string }{
		{"integer keys compare as numbers", `{"by_int":{"1":"a","01":"b"}}`, "by_int.01", "once"},
		{"a key that is no integer", `{"by_int":{"a":"b"}}`, "by_int.a", "whole number"},
		{"a problem inside a type that decodes itself", "{\"sub\":\n{\"nmae\":\"s\"}}", "sub.nmae", "unknown"},
	}
	for _, tt := range tests {
		var w withRules
		err := Decode("doc", []byte(tt.in), &w)
		var l *field.List
		if !errors.As(err, &l) || l.Errors[0].Path != tt.path || !strings.Contains(l.Errors[0].Want+l.Errors[0].Got, tt.frag) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	var w2 withRules
	err := Decode("doc", []byte("{\"y\":\"a\",\n\"sub\":{\"nmae\":1}}"), &w2)
	var l *field.List
	if !errors.As(err, &l) || l.Errors[0].Line != 2 {
		t.Errorf("a nested problem's line: %v", err)
	}
}

// TestDecodeLeavesValueOnError: nothing is written to v unless the whole
// document decodes.
func TestDecodeLeavesValueOnError(t *testing.T) {
	t.Parallel()
	v := struct {
		I int     `json:"i"`
		F float64 `json:"f"`
	}{I: 1}
	if err := Decode("doc", []byte(`{"i":7,"f":1e400}`), &v); err == nil || v.I != 1 {
		t.Fatalf("got %v, i = %d", err, v.I)
	}
}

func BenchmarkDecode(b *testing.B) {
	var buf strings.Builder
	buf.WriteString(`{"name":"bench","ops":[`)
	for i := range 870 {
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString(`{"sm":0.5,"dram":0.25}`)
	}
	buf.WriteString(`],"labels":{"a":"b"}}`)
	data := []byte(buf.String())
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var d doc
			if err := Decode("doc", data, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var d doc
			if err := json.Unmarshal(data, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"name":"a","ops":[{"sm":1}]}`, `{"MEMORY_MIB":1}`, `{"a":1,"a":2}`, `[`, `{"raw":{"x":[1,{"y":null}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d doc
		err := Decode("doc", data, &d)
		if err == nil {
			// What the strict decoder accepts, encoding/json accepts too,
			// with the same value.
			var again doc
			if jerr := json.Unmarshal(data, &again); jerr != nil {
				t.Fatalf("strict accepted what encoding/json refuses: %v", jerr)
			}
			if !reflect.DeepEqual(d, again) {
				t.Fatalf("strict decoded %+v, encoding/json %+v", d, again)
			}
			return
		}
		var l *field.List
		if errors.As(err, &l) && (len(l.Errors) == 0 || len(l.Errors) > MaxErrors) {
			t.Fatalf("%d problems", len(l.Errors))
		}
	})
}
