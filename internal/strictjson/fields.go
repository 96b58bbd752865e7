package strictjson

import (
	"reflect"
	"slices"
	"strings"
	"sync"
)

// structInfo is the set of JSON keys a struct decodes, by encoding/json's
// rules: embedded structs' fields are promoted, the shallowest field of a
// name wins, a tagged one over an untagged one at the same depth, and a name
// that stays ambiguous is no key at all.
type structInfo struct {
	fields []fieldInfo
	index  map[string]int    // key → fields index
	folded map[string]string // lower-case key → key, for the case message
}

type fieldInfo struct {
	name   string
	typ    reflect.Type // nil: any value (a ",string" field, checked by encoding/json)
	depth  int
	tagged bool
}

var fieldCache sync.Map // reflect.Type → *structInfo

func fieldsOf(t reflect.Type) *structInfo {
	if c, ok := fieldCache.Load(t); ok {
		return c.(*structInfo)
	}
	all := collectFields(t)
	byName := map[string][]fieldInfo{}
	var order []string
	for _, f := range all {
		if _, seen := byName[f.name]; !seen {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	info := &structInfo{index: map[string]int{}, folded: map[string]string{}}
	for _, name := range order {
		f, ok := dominant(byName[name])
		if !ok {
			continue
		}
		info.index[name] = len(info.fields)
		info.fields = append(info.fields, f)
		info.folded[strings.ToLower(name)] = name
	}
	fieldCache.Store(t, info)
	return info
}

// collectFields walks t and its embedded structs breadth first, each struct
// type once.
func collectFields(t reflect.Type) []fieldInfo {
	var out []fieldInfo
	visited := map[reflect.Type]bool{}
	level := []reflect.Type{t}
	for depth := 0; len(level) > 0; depth++ {
		var next []reflect.Type
		for _, st := range level {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				f := st.Field(i)
				ft := f.Type
				if f.Anonymous {
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !f.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !f.IsExported() {
					continue
				}
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, ft)
					continue
				}
				fi := fieldInfo{name: name, typ: f.Type, depth: depth, tagged: name != ""}
				if name == "" {
					fi.name = f.Name
				}
				if slices.Contains(strings.Split(opts, ","), "string") {
					fi.typ = nil
				}
				out = append(out, fi)
			}
		}
		level = next
	}
	return out
}

// dominant picks the field a key decodes into among those of one name.
func dominant(fs []fieldInfo) (fieldInfo, bool) {
	top := fs[0].depth
	for _, f := range fs {
		top = min(top, f.depth)
	}
	var at []fieldInfo
	for _, f := range fs {
		if f.depth == top {
			at = append(at, f)
		}
	}
	if len(at) == 1 {
		return at[0], true
	}
	var tagged []fieldInfo
	for _, f := range at {
		if f.tagged {
			tagged = append(tagged, f)
		}
	}
	if len(tagged) == 1 {
		return tagged[0], true
	}
	return fieldInfo{}, false
}
