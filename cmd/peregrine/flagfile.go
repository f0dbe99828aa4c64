package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/peregrine-net/peregrine/app/config"
)

// A flag file is a command's flags as YAML (bench rfc2544 -c FILE): each
// field stands for one flag, sections group them. A flag given on the
// command line wins over the file, as run's --duration wins over the
// file's run.duration; the rest of the file's fields set their flags, and
// the command's usual checks then see one set of values. An error about a
// value from the file names the field and its line instead of the flag.

// fileField maps a field's path in the file ("search.resolution") to its
// flag; doc says what it holds, for the unknown-field error.
type fileField struct{ path, flag string }

// flagOrigin remembers where each flag's value came from.
type flagOrigin map[string]string

// name is how an error names flag: "--flag", or the file's field.
func (o flagOrigin) name(flag string) string {
	if at, ok := o[flag]; ok {
		return at
	}
	return "--" + flag
}

// fix rewrites an error that begins "--flag" to name the file's field
// when the value came from there.
func (o flagOrigin) fix(flag string, err error) error {
	if err == nil {
		return nil
	}
	at, ok := o[flag]
	if !ok {
		return err
	}
	if msg, found := strings.CutPrefix(err.Error(), "--"+flag); found {
		return errors.New(at + msg)
	}
	return fmt.Errorf("%s: %w", at, err)
}

// loadFlagFile reads path and sets each flag its fields name that the
// command line did not. Every problem is listed, one a line, each with
// the field's path and line: an unknown field (with the known ones), a
// section where a value belongs and the reverse, a value its flag refuses.
func loadFlagFile(fs *pflag.FlagSet, path string, fields []fileField) (flagOrigin, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, config.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	if len(data) > config.MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d KiB: not a configuration (see configs/ for an example)", path, config.MaxFileBytes>>10)
	}
	return applyFlagFile(fs, path, data, fields)
}

// applyFlagFile is loadFlagFile on the file's contents, data.
func applyFlagFile(fs *pflag.FlagSet, path string, data []byte, fields []fileField) (flagOrigin, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the file is empty (see configs/ for an example)", path)
		}
		return nil, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	origin := flagOrigin{}
	var errs []error
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		where := "the top level"
		if prefix != "" {
			where = strings.TrimSuffix(prefix, ".")
		}
		if n.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("%s:%d: %s: give a mapping of fields (field: value)", path, n.Line, where))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := prefix + k.Value
			at := fmt.Sprintf("%s:%d: %s", path, k.Line, p)
			fi := slices.IndexFunc(fields, func(f fileField) bool { return f.path == p })
			section := slices.ContainsFunc(fields, func(f fileField) bool { return strings.HasPrefix(f.path, p+".") })
			switch {
			case section:
				walk(v, p+".")
			case fi < 0:
				errs = append(errs, fmt.Errorf("%s: unknown field; %s holds %s", at, where, strings.Join(knownAt(fields, prefix), ", ")))
			default:
				flag := fields[fi].flag
				val, err := scalarOrList(v)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", at, err))
					continue
				}
				fl := fs.Lookup(flag)
				if fl.Changed {
					continue // the command line wins
				}
				if err := fs.Set(flag, val); err != nil {
					// pflag's message names the flag; the field is named here.
					msg := err.Error()
					if i := strings.LastIndex(msg, ": "); i >= 0 {
						msg = msg[i+2:]
					}
					errs = append(errs, fmt.Errorf("%s: %q: %s", at, val, msg))
					continue
				}
				origin[flag] = at
			}
		}
	}
	if len(root.Content) == 1 {
		walk(root.Content[0], "")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return origin, nil
}

// knownAt lists the fields and sections directly under prefix.
func knownAt(fields []fileField, prefix string) []string {
	var out []string
	for _, f := range fields {
		rest, ok := strings.CutPrefix(f.path, prefix)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// scalarOrList is a field's value as its flag takes it: a scalar as
// written, a list of scalars joined by commas.
func scalarOrList(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return v.Value, nil
	case yaml.SequenceNode:
		var items []string
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				return "", errors.New("give a list of values, e.g. [64, 1518]")
			}
			items = append(items, it.Value)
		}
		return strings.Join(items, ","), nil
	}
	return "", errors.New("give a value or a list of values, not a mapping")
}
