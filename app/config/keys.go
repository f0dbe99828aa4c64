package config

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The schema check: a YAML node is walked beside the Go type it decodes
// into, so that every problem the decoder would stop at — a key the type
// has no field for, a value of the wrong type — is reported with the
// field's path, and all of them at once (the decoder stops at the first
// unknown key and names no path for a type error).

var (
	nodeType        = reflect.TypeOf(yaml.Node{})
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
)

// checkNode reports to errs every key of n that t has no field for, every
// value that does not decode into its field's type, and every explicit
// zero given for a field with a default (a field tagged default:"..." is
// left out for its default: 0 there would be read as "absent" and
// silently replaced). what names the mapping in messages ("the file", "a
// sink stage"); skip lists keys handled elsewhere (a stage's kind and
// name).
func checkNode(n *yaml.Node, t reflect.Type, path, what string, errs *Errors, skip ...string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nodeType || n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			*errs = append(*errs, &Error{path, cleanYAML(err)})
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, &Error{path, fmt.Errorf("line %d: %s is a mapping of fields (%s), not %s", n.Line, orFile(what), strings.Join(fieldNames(t), ", "), describe(n))})
			return
		}
		fields := map[string]reflect.StructField{}
		for i := range t.NumField() {
			f := t.Field(i)
			if tag := yamlName(f); tag != "" {
				fields[tag] = f
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if contains(skip, k.Value) {
				continue
			}
			p := join(path, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				names := append(append([]string(nil), skip...), fieldNames(t)...)
				*errs = append(*errs, &Error{p, fmt.Errorf("line %d: %s has no field %q (its fields: %s)", k.Line, orFile(what), k.Value, strings.Join(names, ", "))})
				continue
			}
			before := len(*errs)
			checkNode(v, f.Type, p, what, errs)
			if def, ok := f.Tag.Lookup("default"); ok && len(*errs) == before && isZero(v, f.Type) {
				*errs = append(*errs, &Error{p, fmt.Errorf("line %d: %s is not allowed: leave %s out for its default (%s), or give a value", v.Line, quoteEmpty(v.Value), k.Value, def)})
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			*errs = append(*errs, &Error{path, fmt.Errorf("line %d: a list is wanted, e.g. [a, b], not %s", n.Line, describe(n))})
			return
		}
		for i, e := range n.Content {
			checkNode(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), what, errs)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			*errs = append(*errs, &Error{path, fmt.Errorf("line %d: %s is wanted, not %s", n.Line, kindName(t), describe(n))})
			return
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			*errs = append(*errs, &Error{path, fmt.Errorf("line %d: %q is not %s", n.Line, n.Value, kindName(t))})
		}
	}
}

// isZero reports whether scalar n decodes to t's zero value.
func isZero(n *yaml.Node, t reflect.Type) bool {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return false
	}
	v := reflect.New(t)
	return n.Decode(v.Interface()) == nil && v.Elem().IsZero()
}

func yamlName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if tag == "-" {
		return ""
	}
	return tag
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if tag := yamlName(t.Field(i)); tag != "" {
			names = append(names, tag)
		}
	}
	return names
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orFile(what string) string {
	if what == "" {
		return "the file"
	}
	return what
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// kindName says what a value of a field of type t is, for messages.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<(t.Bits()-1)*2-1)
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a value"
}

// describe names what a node holds, for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// cleanYAML strips the decoder's prefix from an error an Unmarshaler
// returned (it already names the line and the fix).
func cleanYAML(err error) error {
	return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
}
