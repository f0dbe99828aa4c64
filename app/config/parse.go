package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/peregrine-net/peregrine/pmd"
)

// Config is a parsed and validated configuration: the file, and every
// stage decoded into its kind's type, in pipeline order.
type Config struct {
	File File
	// Stages are the stages of every pipeline, pipeline by pipeline.
	Stages []Placed
	// lcore names → index in File.Lcores; port names → index in
	// File.Ports; stage names → index in Stages (the first of a name).
	lcores, ports, stages map[string]int
	// refused are the paths the schema check reported.
	refused map[string]bool
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

// MaxFileBytes bounds a configuration file: the examples in configs/ are
// a few kilobytes, and a file name given by mistake (a capture, a
// device) is refused instead of read to its end.
const MaxFileBytes = 1 << 20

// Load reads and parses the file at path (Parse). File names in it — a
// pcap: port's capture, a pcap-out: port's output, a capture= parameter —
// are relative to the file's directory, as its examples assume; an input
// that does not exist, or an output whose directory does not, is an error
// of the file.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("config: the file is larger than %d KiB: not a configuration (see configs/ for examples)", MaxFileBytes>>10)
	}
	return parse(data, filepath.Dir(path))
}

// Parse decodes data strictly — an unknown key anywhere is an error that
// names it — applies the defaults, and validates the whole configuration
// (Validate) before anything is opened. Its error lists every problem
// found, one per line, each prefixed by the field's path
// ("pipelines[1].stages[0].profile: ..."). File names in ports are taken
// as they are (relative to the working directory) and not looked at: Load
// resolves and checks them.
func Parse(data []byte) (*Config, error) { return parse(data, "") }

func parse(data []byte, dir string) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config: the file is empty (see configs/ for examples)")
		}
		return nil, fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("config: the file holds more than one YAML document (keep one; remove the '---' after the first)")
	}
	if err := checkAliases(&root); err != nil {
		return nil, err
	}
	var errs Errors
	var f File
	if len(root.Content) == 1 {
		doc := root.Content[0]
		checkNode(doc, reflect.TypeOf(f), "", "", &errs)
		// What the check refused stays at its zero value; the rest decodes.
		_ = doc.Decode(&f)
	}
	applyDefaults(&f)
	if dir != "" {
		resolvePorts(&f, dir, &errs)
	}
	c := &Config{File: f, lcores: map[string]int{}, ports: map[string]int{}, stages: map[string]int{}}
	for i, lc := range f.Lcores {
		if _, dup := c.lcores[lc.Name]; !dup && lc.Name != "" {
			c.lcores[lc.Name] = i
		}
	}
	for i, p := range f.Ports {
		if _, dup := c.ports[p.Name]; !dup {
			c.ports[p.Name] = i
		}
	}
	counts := map[string]int{}
	for i, pl := range f.Pipelines {
		loop, ok := c.lcores[pl.Lcore]
		if !ok {
			loop = -1 // reported by Validate
		}
		for j := range pl.Stages {
			path := fmt.Sprintf("pipelines[%d].stages[%d]", i, j)
			st, serrs := decodeStage(&pl.Stages[j], path, counts)
			errs = append(errs, serrs...)
			if st.Spec == nil {
				continue
			}
			st.Lcore = loop
			if _, dup := c.stages[st.Name]; !dup {
				c.stages[st.Name] = len(c.Stages)
			}
			c.Stages = append(c.Stages, st)
		}
	}
	// A stage without a known kind is left out of the checks; every other
	// problem is still reported with it. A field the schema refused is
	// reported once, not again as the zero it was left at.
	c.refused = map[string]bool{}
	for _, e := range errs {
		c.refused[e.Path] = true
	}
	if err := c.validate(errs); err != nil {
		return nil, err
	}
	return c, nil
}

// MaxAliasedValues bounds how many values a file's aliases repeat: an
// alias is expanded each place it is used, by the checks and by the
// decoder, so a few thousand aliases of a long list would make a kilobyte
// file cost hours and gigabytes. A file that writes its values out is
// checked in time linear in its size.
const MaxAliasedValues = 100_000

// checkAliases refuses a document whose aliases (*name) would expand to
// more than MaxAliasedValues values beyond the document's own, or that
// contains itself, before anything walks it. The expanded size of each
// node is counted once (memo), so the count costs the document's own
// size however much the aliases multiply it.
func checkAliases(root *yaml.Node) error {
	const busy, huge = -1, 1 << 40
	// expanded is a node's value count with every alias replaced by its
	// anchor's value, memoised per node so each is counted once.
	memo := map[*yaml.Node]int{}
	var first, cyclic *yaml.Node
	var expanded func(n *yaml.Node) int
	expanded = func(n *yaml.Node) int {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			if first == nil {
				first = n
			}
			if memo[n.Alias] == busy {
				cyclic = n
				return 0
			}
			return expanded(n.Alias)
		}
		if v, ok := memo[n]; ok && v != busy {
			return v
		}
		memo[n] = busy
		v := 1
		for _, c := range n.Content {
			v = min(v+expanded(c), huge) // nested aliases multiply: saturate
		}
		memo[n] = v
		return v
	}
	var own func(n *yaml.Node) int
	own = func(n *yaml.Node) int {
		v := 1
		for _, c := range n.Content {
			v += own(c)
		}
		return v
	}
	total := expanded(root)
	if cyclic != nil {
		return fmt.Errorf("config: line %d: alias *%s is used inside its own anchor's value: a value cannot contain itself", cyclic.Line, cyclic.Value)
	}
	if extra := total - own(root); extra > MaxAliasedValues {
		return fmt.Errorf("config: line %d: the file's aliases (*%s and any others) repeat %d values where they are used: at most %d; write the values out, or alias fewer or shorter ones", first.Line, first.Value, extra, MaxAliasedValues)
	}
	return nil
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
	applyHostDefaults(f.Host)
}

// decodeStage reads one stage mapping: its kind, its name, and the rest
// into the kind's type, every unknown key and wrong value reported.
func decodeStage(n *yaml.Node, path string, counts map[string]int) (Placed, Errors) {
	if n.Kind != yaml.MappingNode {
		return Placed{}, Errors{{path, fmt.Errorf("line %d: a stage is a mapping with a kind key, e.g. {kind: forwarder, ports: [p0, p1]}", n.Line)}}
	}
	var kind, name string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "kind":
			kind = v.Value
		case "name":
			name = v.Value
		}
	}
	kinds := Kinds()
	if kind == "" {
		return Placed{}, Errors{{path + ".kind", fmt.Errorf("line %d: missing: give the stage's kind, one of %s", n.Line, kindNames(kinds))}}
	}
	i := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name == kind })
	if i < 0 {
		return Placed{}, Errors{{path + ".kind", fmt.Errorf("%q is not a stage kind: use one of %s", kind, kindNames(kinds))}}
	}
	spec := kinds[i].New()
	// What the schema refuses is reported and left at its zero value; the
	// stage is still checked, so its other problems are reported too.
	var errs Errors
	checkNode(n, reflect.TypeOf(spec), path, "a "+kind+" stage", &errs, "kind", "name")
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: n.Tag, Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "kind" && k != "name" {
			rest.Content = append(rest.Content, n.Content[i], n.Content[i+1])
		}
	}
	if err := rest.Decode(spec); err != nil && len(errs) == 0 {
		errs = append(errs, &Error{path, cleanYAML(err)})
	}
	if name == "" {
		name = fmt.Sprintf("%s-%d", kind, counts[kind])
	}
	counts[kind]++
	return Placed{Path: path, Kind: kind, Name: name, Spec: spec, line: n.Line}, errs
}

// resolvePorts makes the file names of the ports relative to dir, and
// reports an input that does not exist or an output whose directory does
// not.
func resolvePorts(f *File, dir string, errs *Errors) {
	resolve := func(name string) string {
		if name == "" || filepath.IsAbs(name) {
			return name
		}
		return filepath.Join(dir, name)
	}
	for i := range f.Ports {
		raw := f.Ports[i].Spec
		spec, err := pmd.ParseSpec(raw)
		if err != nil {
			continue // Validate reports it
		}
		path := fmt.Sprintf("ports[%d].spec", i)
		outDir := func(what, out string) {
			if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
				*errs = append(*errs, &Error{path, fmt.Errorf("%q: the directory of %s %s does not exist (a relative name is taken from the config file's directory, %s)", raw, what, out, dir)})
			}
		}
		switch spec.Driver {
		case "pcap":
			in := resolve(spec.Target)
			if _, err := os.Stat(in); err != nil {
				*errs = append(*errs, &Error{path, fmt.Errorf("%q: the capture to read, %s, cannot be read: %v (a relative name is taken from the config file's directory, %s)", raw, in, unwrapPath(err), dir)})
			}
			f.Ports[i].Spec = replaceTarget(f.Ports[i].Spec, spec.Target, in)
		case "pcap-out":
			out := resolve(spec.Target)
			outDir("the output", out)
			f.Ports[i].Spec = replaceTarget(f.Ports[i].Spec, spec.Target, out)
		}
		if c := spec.Params.Get(pmd.CaptureParam); c != "" {
			out := resolve(c)
			outDir("the capture", out)
			f.Ports[i].Spec = strings.Replace(f.Ports[i].Spec, pmd.CaptureParam+"="+c, pmd.CaptureParam+"="+out, 1)
		}
	}
}

// replaceTarget puts target in place of old in a DRIVER:TARGET[?...] spec.
func replaceTarget(spec, old, target string) string {
	driver, rest, _ := strings.Cut(spec, ":")
	return driver + ":" + target + strings.TrimPrefix(rest, old)
}

// unwrapPath drops a *PathError's repetition of the name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
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

func (e *Error) Error() string {
	if e.Path == "" {
		return "config: " + e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

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
