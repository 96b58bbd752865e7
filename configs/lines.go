package configs

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/colocd/colocd/field"
	"go.yaml.in/yaml/v3"
)

// keyLines maps a key path as the decoder spells it (lower case:
// "admission.max_jobs", "services[0].slo.p99_ms") to its line in the file,
// so that a problem found after decoding still points into the file.
type keyLines map[string]int

// line returns the line of key, or of the nearest enclosing key that has
// one (a problem inside a profile points at services[0].profile), or 0.
func (l keyLines) line(key string) int {
	for key = strings.ToLower(key); key != ""; {
		if n, ok := l[key]; ok {
			return n
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

// annotate sets the line of every problem that has none.
func (l keyLines) annotate(problems []*field.Error) {
	for _, p := range problems {
		if p.Line == 0 {
			p.Line = l.line(p.Path)
		}
	}
}

// scanYAML walks the file's YAML nodes along the Config type. It records
// each key's line, and names each key that Config does not have, that
// differs from one only in case (the decoder would take "MAX_JOBS" for
// max_jobs), or that a mapping holds twice. dup reports whether any key is
// repeated: the decoder refuses such a file outright.
func scanYAML(data []byte) (lines keyLines, problems []*field.Error, dup bool, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, false, err
	}
	s := yamlScan{lines: keyLines{}}
	if len(doc.Content) > 0 {
		s.walk(doc.Content[0], configType, "")
	}
	return s.lines, s.problems, s.dup, nil
}

type yamlScan struct {
	lines    keyLines
	problems []*field.Error
	dup      bool
}

func (s *yamlScan) add(key string, line int, want, got string) {
	s.problems = append(s.problems, &field.Error{Path: key, Want: want, Got: got, Line: line})
}

func (s *yamlScan) walk(n *yaml.Node, t reflect.Type, prefix string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		s.mapping(n, t, prefix)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			at := fmt.Sprintf("%s[%d]", prefix, i)
			s.lines[strings.ToLower(at)] = item.Line
			s.walk(item, t.Elem(), at)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		// The decoder reads every key in lower case, a map's own keys too
		// (metrics.labels): a key in upper case would silently become
		// another one.
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			at := joinKey(prefix, k.Value)
			if first, ok := seen[strings.ToLower(k.Value)]; ok {
				s.add(at, k.Line, "each key once", fmt.Sprintf("it again (first on line %d)", first))
				s.dup = true
				continue
			}
			seen[strings.ToLower(k.Value)] = k.Line
			s.lines[strings.ToLower(at)] = k.Line
			if k.Value != strings.ToLower(k.Value) {
				s.add(at, k.Line, fmt.Sprintf("a key in lower case (%q): keys here are read in lower case", strings.ToLower(k.Value)), "a key with upper-case letters")
			}
		}
	}
}

func (s *yamlScan) mapping(n *yaml.Node, t reflect.Type, prefix string) {
	var names []string
	exact := map[string]reflect.Type{}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			tag := f.Tag.Get("mapstructure")
			if tag == "-" || tag == "" {
				continue // set from elsewhere, never from the file
			}
			exact[tag] = f.Type
			names = append(names, tag)
		}
	}
	seen := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" { // "<<: *anchor": after the explicit keys, which win
			merges = append(merges, v)
			continue
		}
		if first, ok := seen[k.Value]; ok {
			s.add(joinKey(prefix, k.Value), k.Line, "each key once", fmt.Sprintf("it again (first on line %d)", first))
			s.dup = true
			continue
		}
		seen[k.Value] = k.Line
		s.member(k, v, prefix, exact, names)
	}
	for _, m := range merges {
		s.merge(m, prefix, exact, names, seen)
	}
}

// merge walks the mappings a merge key names (one alias, or a list of
// them): a key already given, explicitly or by an earlier merge, is
// overridden, not repeated.
func (s *yamlScan) merge(m *yaml.Node, prefix string, exact map[string]reflect.Type, names []string, seen map[string]int) {
	if m.Kind == yaml.AliasNode && m.Alias != nil {
		m = m.Alias
	}
	switch m.Kind {
	case yaml.SequenceNode:
		for _, item := range m.Content {
			s.merge(item, prefix, exact, names, seen)
		}
	case yaml.MappingNode:
		var inner []*yaml.Node
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			if k.Tag == "!!merge" {
				inner = append(inner, v)
				continue
			}
			if _, ok := seen[k.Value]; ok {
				continue
			}
			seen[k.Value] = k.Line
			s.member(k, v, prefix, exact, names)
		}
		for _, v := range inner {
			s.merge(v, prefix, exact, names, seen)
		}
	}
}

// member checks one key of a mapping for a struct and walks its value.
func (s *yamlScan) member(k, v *yaml.Node, prefix string, exact map[string]reflect.Type, names []string) {
	key := k.Value
	at := joinKey(prefix, key)
	ft, ok := exact[key]
	switch {
	case ok:
		s.lines[strings.ToLower(at)] = k.Line
		s.walk(v, ft, at)
	case exact[strings.ToLower(key)] != nil:
		s.add(at, k.Line, fmt.Sprintf("the key %q (keys are lower case)", strings.ToLower(key)), "a key in another case")
	case strings.Contains(key, "."):
		s.add(at, k.Line, "nested keys, one per level (admission: {max_jobs: 1})", "a dotted key")
	default:
		s.add(at, k.Line, "one of the keys "+strings.Join(names, ", "), "an unknown key")
	}
}

// joinKey is the dotted path of key under prefix.
func joinKey(prefix, key string) string {
	switch {
	case key == "":
		return prefix + `""`
	case prefix == "":
		return key
	}
	return prefix + "." + key
}
