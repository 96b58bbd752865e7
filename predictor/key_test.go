package predictor

import (
	"reflect"
	"testing"
)

// keyIgnores lists the profile fields that Key leaves out on purpose: they
// are for readers and change no prediction.
var keyIgnores = map[string]bool{"Notes": true, "Source": true}

// TestKeyCoversEveryField walks Profile's fields, and those of the structs
// it holds, changes one at a time, and checks that the key changes, or, for
// a field in keyIgnores, that it does not. A field added to Profile, Op,
// Summary or Device fails here until Key hashes it or keyIgnores names it.
func TestKeyCoversEveryField(t *testing.T) {
	t.Parallel()
	base := func() *Profile {
		d, l2 := 0.3, 0.2
		return &Profile{
			Format: ProfileFormat, Name: "p", Kind: KindTraining,
			Device: Device{Name: "NVIDIA H200", SMs: 132}, MemoryMiB: 100,
			Ops:     []Op{{Name: "k", DurUS: 10, GapUS: 1, SM: 0.5, Occupancy: 0.4, DRAM: &d, L2: &l2}},
			Summary: &Summary{LatencyMS: 1, IterationMS: 2, GPUUtil: 0.5, MemUtil: 0.1},
			Notes:   []string{"n"}, Source: &Source{Trace: "t"},
		}
	}
	want := base().Key()
	n := 0
	var walk func(path string, get func(*Profile) reflect.Value, typ reflect.Type, ignored bool)
	walk = func(path string, get func(*Profile) reflect.Value, typ reflect.Type, ignored bool) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			fpath, ign := path+f.Name, ignored || keyIgnores[f.Name]
			field := func(p *Profile) reflect.Value { return get(p).Field(i) }
			switch {
			case f.Type.Kind() == reflect.Struct:
				walk(fpath+".", field, f.Type, ign)
				continue
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				walk(fpath+"[0].", func(p *Profile) reflect.Value { return field(p).Index(0) }, f.Type.Elem(), ign)
			case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
				walk(fpath+".", func(p *Profile) reflect.Value { return field(p).Elem() }, f.Type.Elem(), ign)
			}
			p := base()
			if !mutate(field(p)) {
				t.Fatalf("%s: the test cannot change a %s; teach mutate", fpath, f.Type)
			}
			n++
			if changed := p.Key() != want; changed == ign {
				if ign {
					t.Errorf("%s is ignored by the key, but changing it changed the key", fpath)
				} else {
					t.Errorf("%s: changing it left the key unchanged: hash it in Key or list it in keyIgnores", fpath)
				}
			}
		}
	}
	walk("", func(p *Profile) reflect.Value { return reflect.ValueOf(p).Elem() }, reflect.TypeFor[Profile](), false)
	if n < 20 {
		t.Fatalf("walked %d fields; the walk is broken", n)
	}
}

// mutate changes v to another value of its type.
func mutate(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int:
		v.SetInt(v.Int() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Pointer, reflect.Slice:
		v.SetZero() // set in base, so nil is a change
	default:
		return false
	}
	return true
}

func TestKeyIsStable(t *testing.T) {
	t.Parallel()
	p := &Profile{Format: ProfileFormat, Name: "a", Kind: KindTraining, Ops: []Op{{DurUS: 5, SM: 1}}}
	q := *p
	q.Ops = append([]Op(nil), p.Ops...)
	if p.Key() != q.Key() {
		t.Fatal("equal profiles have different keys")
	}
}
