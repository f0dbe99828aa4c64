package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is a parsed and validated configuration: the file, and every
// stage decoded into its kind's type, in pipeline order.
type Config struct {
	File File
	// Stages are the stages of every pipeline, pipeline by pipeline.
	Stages []Placed
	// lcore names → index in File.Lcores
	lcores map[string]int
}

// Placed is one stage of one pipeline.
type Placed struct {
	// Path is where the stage is in the file, e.g. "pipelines[1].stages[0]".
	Path string
	// Kind and Name are the stage's "kind" and "name" keys (Name defaults
	// to KIND-N, N counting stages of that kind from 0).
	Kind, Name string
	// Lcore is the index in File.Lcores of the loop that polls the stage.
	Lcore int
	// Spec is the stage's fields, decoded into its kind's type.
	Spec Stage
	// line is where the stage starts in the file.
	line int
}

// Load reads and parses the file at path (Parse).
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data)
}

// Parse decodes data strictly — an unknown key anywhere is an error that
// names it — applies the defaults, and validates the whole configuration
// (Validate) before anything is opened. Its error lists every problem
// found, one per line, each prefixed by the field's path
// ("pipelines[1].stages[0].profile: ...").
func Parse(data []byte) (*Config, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config: the file is empty (see configs/ for examples)")
		}
		return nil, fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("config: the file holds more than one YAML document (keep one; remove the '---' after the first)")
	}
	applyDefaults(&f)
	c := &Config{File: f, lcores: map[string]int{}}
	for i, lc := range f.Lcores {
		if _, dup := c.lcores[lc.Name]; !dup && lc.Name != "" {
			c.lcores[lc.Name] = i
		}
	}
	var errs Errors
	counts := map[string]int{}
	for i, pl := range f.Pipelines {
		loop, ok := c.lcores[pl.Lcore]
		if !ok {
			loop = -1 // reported by Validate
		}
		for j := range pl.Stages {
			path := fmt.Sprintf("pipelines[%d].stages[%d]", i, j)
			st, err := decodeStage(&pl.Stages[j], path, counts)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			st.Lcore = loop
			c.Stages = append(c.Stages, st)
		}
	}
	// A stage that did not decode is left out of the checks; every other
	// problem is still reported with it.
	if err := c.validate(errs); err != nil {
		return nil, err
	}
	return c, nil
}

func applyDefaults(f *File) {
	if f.Pool.Frames == 0 {
		f.Pool.Frames = DefaultFrames
	}
	if f.Pool.FrameSize == 0 {
		f.Pool.FrameSize = DefaultFrameSize
	}
	if f.Idle == "" {
		f.Idle = DefaultIdle
	}
	if f.Run.Drain == 0 {
		f.Run.Drain = DefaultDrain
	}
	if f.Run.StatsPeriod == 0 {
		f.Run.StatsPeriod = DefaultStatsPeriod
	}
}

// decodeStage reads one stage mapping: its kind, its name, and the rest
// strictly into the kind's type.
func decodeStage(n *yaml.Node, path string, counts map[string]int) (Placed, *Error) {
	if n.Kind != yaml.MappingNode {
		return Placed{}, &Error{path, fmt.Errorf("line %d: a stage is a mapping with a kind key, e.g. {kind: forwarder, ports: [p0, p1]}", n.Line)}
	}
	var kind, name string
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: n.Tag, Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "kind":
			kind = v.Value
		case "name":
			name = v.Value
		default:
			rest.Content = append(rest.Content, k, v)
		}
	}
	kinds := Kinds()
	if kind == "" {
		return Placed{}, &Error{path + ".kind", fmt.Errorf("line %d: missing: give the stage's kind, one of %s", n.Line, kindNames(kinds))}
	}
	i := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name == kind })
	if i < 0 {
		return Placed{}, &Error{path + ".kind", fmt.Errorf("%q is not a stage kind: use one of %s", kind, kindNames(kinds))}
	}
	spec := kinds[i].New()
	if err := checkKeys(rest, reflect.TypeOf(spec), path, kind); err != nil {
		return Placed{}, err
	}
	if err := rest.Decode(spec); err != nil {
		return Placed{}, &Error{path, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))}
	}
	if name == "" {
		name = fmt.Sprintf("%s-%d", kind, counts[kind])
	}
	counts[kind]++
	return Placed{Path: path, Kind: kind, Name: name, Spec: spec, line: n.Line}, nil
}

// checkKeys refuses a key of mapping n that type t (a struct, or a
// pointer to one) has no field for, and recurses into nested mappings:
// yaml.Node.Decode is not strict, so a stage is checked here.
func checkKeys(n *yaml.Node, t reflect.Type, path, kind string) *Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		return nil
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = f.Type
		names = append(names, tag)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := fields[k.Value]
		if !ok {
			return &Error{path + "." + k.Value, fmt.Errorf("line %d: a %s stage has no field %q (its fields: kind, name, %s)", k.Line, kind, k.Value, strings.Join(names, ", "))}
		}
		if err := checkKeys(v, ft, path+"."+k.Value, kind); err != nil {
			return err
		}
	}
	return nil
}

func kindNames(kinds []Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	return strings.Join(names, ", ")
}

// Error is one problem with a configuration: the field's path in the file
// and what is wrong with it, with the fix.
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errors are every problem found in a configuration, in file order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the errors one by one (errors.As finds each *Error).
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
