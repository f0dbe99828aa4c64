package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/peregrine-net/peregrine/app/config"
)

// The contract every command line keeps, checked over the command tree as
// it is (every subcommand, every flag, walked from cobra; every config
// field, walked from the schema's types), so a new flag or field is
// covered without touching this file:
//
//   - a value is refused (exit 2) or accepted before anything opens: the
//     checks run in flag parsing, Args and PreRunE; RunE, which opens, is
//     replaced here by a stub that records "accepted";
//   - a refusal names the flag as typed, holds no Go identifier
//     (Options.PMTU, <nil>, strconv.ParseInt) and no panic, and comes
//     within seconds;
//   - a negative count, size or duration is always refused; a count or
//     size of 2^40 is refused unless the flag is annotated unbounded (a
//     seed, a frame count).

// replayInput is the capture gen --replay's base replays (inTempDir
// writes it).
const replayInput = "in.pcap"

// contractBases are the command lines each runnable command is fed values
// on top of: what makes it runnable (a role, required ports), and its
// modes, so that a flag used only in one mode is fed values in it. Every
// base must be accepted as it is (TestContractBasesAreAccepted).
var contractBases = map[string][][]string{
	"peregrine run":                   {{"-c", "../../configs/gen-sink.yaml"}},
	"peregrine demo":                  {{}, {"--workload", "forward"}, {"--workload", "roce"}},
	"peregrine gen":                   {{"--port", "null:"}, {"--port", "null:", "--rx"}, {"--port", "null:", "--replay", replayInput}},
	"peregrine fwd":                   {{"--port", "null:"}, {"--port", "null:", "--mode", "txonly"}, {"--port", "null:", "--mode", "mac", "--peer-mac", "02:00:00:00:00:02"}},
	"peregrine fabric":                {{"--port-a", "null:", "--port-b", "null:"}},
	"peregrine transport":             {{"target", "--port", "null:", "--ip", "198.18.0.2"}, {"initiator", "--port", "null:", "--ip", "198.18.0.1", "--peer-mac", "02:00:00:00:00:02", "--peer-ip", "198.18.0.2"}, {"initiator", "--port", "null:", "--ip", "198.18.0.1", "--peer-mac", "02:00:00:00:00:02", "--peer-ip", "198.18.0.2", "--targets", "4", "--region-size", "1MiB", "--sizes", "512"}},
	"peregrine decode":                {{"x.pcap"}},
	"peregrine roce":                  {{"--port", "null:", "--port", "null:"}},
	"peregrine roce sample":           {{"-o", "x.pcap"}},
	"peregrine help":                  {{}},
	"peregrine bench render":          {{"x.txt", "--report", "x"}},
	"peregrine completion bash":       {{}},
	"peregrine completion fish":       {{}},
	"peregrine completion zsh":        {{}},
	"peregrine completion powershell": {{}},
}

// contractValues are fed to every flag: zero, negative, absurd, malformed
// and empty.
var contractValues = []string{"0", "-1", "-1s", "1099511627776", "99999999999999999999", "1e308", "x!", "", " ", "1EiB", "0x", "-0", "NaN"}

// goIdentifier finds Go in a message: a qualified field (Options.PMTU,
// RunOptions.Period), a nil printed by %v, a strconv error, a formatting
// verb gone wrong, a Go type, a CamelCase field name standing alone.
var goIdentifier = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\.[A-Z][A-Za-z0-9]*\b|<nil>|\\u003cnil|strconv\.|time: |%!|\*[a-z]+\.[A-Z]|\b[A-Z][a-z]+(?:[A-Z][a-z]+)+[A-Z]*\b|\b[A-Z][a-z]+[A-Z]{2,}\b`)

// productWords look like Go identifiers and are not.
var productWords = map[string]bool{"RoCE": true}

// findGo returns the first Go identifier in s ("" for none).
func findGo(s string) string {
	for _, m := range goIdentifier.FindAllString(s, -1) {
		if !productWords[m] {
			return m
		}
	}
	return ""
}

// unbounded flags take any value of their type: 2^40 is a valid seed.
func unbounded(f *pflag.Flag) bool {
	switch f.Name {
	case "seed", "count", "expect", "region-key":
		return true
	}
	return false
}

// outcome is what one command line did.
type outcome struct {
	out      string
	code     int
	accepted bool
	panicked any
	took     time.Duration
}

// contractRun runs args in-process with every RunE replaced by a stub: it
// reports whether the command line was accepted, and what it printed.
func contractRun(args []string) outcome {
	root := newRootCommand()
	var accepted bool
	var stub func(c *cobra.Command)
	stub = func(c *cobra.Command) {
		if c.Runnable() && c != root {
			c.Run = nil
			c.RunE = func(*cobra.Command, []string) error { accepted = true; return nil }
		}
		for _, sub := range c.Commands() {
			stub(sub)
		}
	}
	stub(root)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	start := time.Now()
	res := outcome{code: -1}
	func() {
		defer func() { res.panicked = recover() }()
		res.code = execute(root, args, &out)
	}()
	res.out, res.accepted, res.took = out.String(), accepted, time.Since(start)
	return res
}

// leafCommands walks the tree: every command with a run, but groups
// (bench, completion) whose run only refuses a missing subcommand: their
// flags are their subcommands' and are fed there. A group that runs
// (roce) has a base.
func leafCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	_, based := contractBases[c.CommandPath()]
	if c.Runnable() && c.HasParent() && (!c.HasSubCommands() || based) {
		out = append(out, c)
	}
	for _, sub := range c.Commands() {
		out = append(out, leafCommands(sub)...)
	}
	return out
}

// flagsOf lists every flag a command takes, its own and inherited.
func flagsOf(c *cobra.Command) []*pflag.Flag {
	var fs []*pflag.Flag
	seen := map[string]bool{}
	add := func(f *pflag.Flag) {
		if !seen[f.Name] && f.Name != "help" && f.Name != "version" {
			seen[f.Name] = true
			fs = append(fs, f)
		}
	}
	c.LocalFlags().VisitAll(add)
	c.InheritedFlags().VisitAll(add)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	return fs
}

// numeric reports whether a flag holds a number, a size or a duration.
func numeric(f *pflag.Flag) (count, duration bool) {
	switch t := f.Value.Type(); {
	case t == "duration":
		return false, true
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || t == "size":
		return !strings.HasSuffix(t, "Slice"), false
	}
	return false, false
}

// inTempDir runs the whole test in a directory of its own: a command line
// that wrongly wrote a file (a profile, a capture) would write it there,
// and the test checks that none did.
func inTempDir(t *testing.T) (dir string, restore func()) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	// The bases name ../../configs: give the temporary directory the same
	// view of the repository.
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(wd, "../../configs"), filepath.Join(dir, "configs")); err != nil {
		t.Fatal(err)
	}
	// gen --replay's base reads its capture's header before anything
	// runs: give it a capture of no packets.
	header := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0}
	if err := os.WriteFile(filepath.Join(sub, replayInput), header, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(sub); err != nil {
		t.Fatal(err)
	}
	return sub, func() { _ = os.Chdir(wd) }
}

// basesOf is a command's bases: the command alone when it needs nothing.
func basesOf(c *cobra.Command) [][]string {
	if b, ok := contractBases[c.CommandPath()]; ok {
		return b
	}
	return [][]string{{}}
}

// TestContractBasesAreAccepted: every runnable command has a base, and
// each base is accepted as it is (so a refusal below is the flag's).
func TestContractBasesAreAccepted(t *testing.T) {
	_, restore := inTempDir(t)
	defer restore()
	for _, c := range leafCommands(newRootCommand()) {
		for _, b := range basesOf(c) {
			args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "peregrine")), b...)
			if r := contractRun(args); !r.accepted || r.code != exitOK {
				t.Errorf("base peregrine %s: exit %d, accepted %v (give the command a base in contractBases: what makes it runnable):\n%s", strings.Join(args, " "), r.code, r.accepted, r.out)
			}
		}
	}
}

// TestContractEveryFlag feeds every flag of every command, in every base,
// every contract value.
func TestContractEveryFlag(t *testing.T) {
	dir, restore := inTempDir(t)
	defer restore()
	type job struct {
		args []string
		flag *pflag.Flag
		val  string
	}
	var jobs []job
	for _, c := range leafCommands(newRootCommand()) {
		path := strings.Fields(strings.TrimPrefix(c.CommandPath(), "peregrine"))
		for _, base := range basesOf(c) {
			for _, f := range flagsOf(c) {
				if contains(base, "--"+f.Name) {
					continue
				}
				for _, v := range contractValues {
					args := append(append(append([]string(nil), path...), base...), "--"+f.Name+"="+v)
					jobs = append(jobs, job{args, f, v})
				}
			}
		}
	}
	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	next := make(chan job)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				checkOutcome(j.args, j.flag, j.val, contractRun(j.args), fail)
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d command lines", len(jobs))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != replayInput {
			t.Errorf("a command line wrote %s before it was accepted", e.Name())
		}
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// checkOutcome asserts the contract for one command line.
func checkOutcome(args []string, f *pflag.Flag, val string, r outcome, fail func(string, ...any)) {
	line := "peregrine " + strings.Join(args, " ")
	switch {
	case r.panicked != nil:
		fail("%s panicked: %v\n%s", line, r.panicked, r.out)
		return
	case r.took > 5*time.Second:
		fail("%s took %v to decide", line, r.took)
	}
	if r.accepted {
		if r.code != exitOK {
			fail("%s: accepted, then exit %d:\n%s", line, r.code, r.out)
		}
		count, duration := numeric(f)
		switch {
		case count && val == "-1", duration && (val == "-1s" || val == "-1"):
			fail("%s: a negative value was accepted", line)
		case count && val == "1099511627776" && !unbounded(f):
			fail("%s: 2^40 was accepted (bound the flag, or list it in unbounded)", line)
		}
		return
	}
	if r.code != exitUsage {
		fail("%s: exit %d before anything ran, want %d (a usage error):\n%s", line, r.code, exitUsage, r.out)
	}
	if !regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `([^a-z0-9-]|$)`).MatchString(r.out) {
		fail("%s: the error does not name --%s:\n%s", line, f.Name, r.out)
	}
	if m := findGo(r.out); m != "" {
		fail("%s: the error holds Go (%q):\n%s", line, m, r.out)
	}
}

// TestContractGoIdentifier: the pattern finds what it is for and leaves
// the product's words alone.
func TestContractGoIdentifier(t *testing.T) {
	for _, s := range []string{"roce: Options.PMTU 1000", "app: RunOptions.Period 0s", "(set Params.BaseTarget", "needs PeerMAC (the", "(<nil>)", `(\u003cnil\u003e)`, "strconv.ParseInt: parsing", "time: invalid duration"} {
		if findGo(s) == "" {
			t.Errorf("%q is not found", s)
		}
	}
	for _, s := range []string{"RoCEv2 frames", "IPv4 address", "4KiB, 1MiB, 1GiB", "--peer-mac 02:00:00:00:00:02", "AF_XDP", "use 0x2..0xfffffe", "the RoCE stage", "WQEs"} {
		if m := findGo(s); m != "" {
			t.Errorf("%q is taken for Go (%q)", s, m)
		}
	}
}

// contractConfigs are files every field of the schema is fed values in:
// one per stage kind.
var contractConfigs = map[string]string{
	"forwarder": "lcores: [{name: a}]\nports: [{name: p0, spec: \"null:\"}, {name: p1, spec: \"null:\"}]\npipelines: [{lcore: a, stages: [{kind: forwarder, ports: [p0, p1]}]}]\n",
	"generator": "lcores: [{name: a}]\nports: [{name: p0, spec: \"null:\"}]\npipelines: [{lcore: a, stages: [{kind: generator, port: p0}]}]\n",
	"sink":      "lcores: [{name: a}]\nports: [{name: p0, spec: \"null:\"}]\npipelines: [{lcore: a, stages: [{kind: sink, port: p0}]}]\n",
	"fabric":    "lcores: [{name: a}]\nports: [{name: p0, spec: \"null:\"}, {name: p1, spec: \"null:\"}]\npipelines: [{lcore: a, stages: [{kind: fabric, a: p0, b: p1}]}]\n",
	"transport": "lcores: [{name: a}]\nports: [{name: p0, spec: \"mem:c/0\"}, {name: p1, spec: \"mem:c/1\"}]\npipelines: [{lcore: a, stages: [{kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: t}, {kind: transport, name: t, role: target, port: p1, ip: 198.18.0.2}]}]\n",
	"roce":      "lcores: [{name: a}]\nports: [{name: p0, spec: \"null:\"}, {name: p1, spec: \"null:\"}]\npipelines: [{lcore: a, stages: [{kind: roce, net: p0, host: p1}]}]\n",
}

// contractYAMLValues are fed to every field: zero, negative, absurd,
// malformed, empty, and values of the wrong shape.
var contractYAMLValues = []string{"0", "-1", "1099511627776", "99999999999999999999", "x!", `""`, "[1, 2]", "{a: 1}", "-1s", "~"}

// TestContractEveryConfigField walks the schema (the file's type and every
// stage kind's) and feeds each field every value in each base file: a
// refusal names the field's path and holds no Go; a negative count or
// duration is never accepted; nothing panics.
func TestContractEveryConfigField(t *testing.T) {
	for kind, base := range contractConfigs {
		if _, err := config.Parse([]byte(base)); err != nil {
			t.Fatalf("base %s does not parse: %v", kind, err)
		}
	}
	n := 0
	for _, k := range config.Kinds() {
		base, ok := contractConfigs[k.Name]
		if !ok {
			t.Errorf("stage kind %s has no base file in contractConfigs", k.Name)
			continue
		}
		var fields []fieldPath
		walkFields(reflect.TypeOf(config.File{}), "", &fields)
		var stage []fieldPath
		walkFields(reflect.TypeOf(k.New()), "", &stage)
		for _, f := range stage {
			fields = append(fields, fieldPath{path: "pipelines[0].stages[0]." + f.path, typ: f.typ})
		}
		for _, f := range fields {
			for _, v := range contractYAMLValues {
				doc := setField(t, base, f.path, v)
				if doc == "" {
					continue
				}
				n++
				checkConfig(t, f, v, doc)
			}
		}
	}
	t.Logf("%d files", n)
}

// negativeMeans are fields whose -1 means something (the schema's docs
// say what): an unpinned loop.
var negativeMeans = map[string]bool{"lcores[0].cpu": true}

type fieldPath struct {
	path string
	typ  reflect.Type
}

// walkFields lists the schema's leaf fields as paths; a list's first
// element stands for every element, a yaml.Node (a stage) is walked per
// kind by the caller.
func walkFields(t reflect.Type, path string, out *[]fieldPath) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeOf(yaml.Node{}):
		return
	case reflect.PointerTo(t).Implements(reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()):
		*out = append(*out, fieldPath{path, t})
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			walkFields(f.Type, p, out)
		}
	case t.Kind() == reflect.Slice:
		*out = append(*out, fieldPath{path, t})
		walkFields(t.Elem(), path+"[0]", out)
	default:
		*out = append(*out, fieldPath{path, t})
	}
}

// setField returns base with the field at path set to the YAML value v
// ("" when the path does not exist in base and cannot be added: an
// element of a list the base does not have).
func setField(t *testing.T, base, path, v string) string {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(base), &root); err != nil {
		t.Fatal(err)
	}
	var val yaml.Node
	if err := yaml.Unmarshal([]byte("v: "+v), &val); err != nil {
		t.Fatal(err)
	}
	value := val.Content[0].Content[1]
	n := root.Content[0]
	parts := regexp.MustCompile(`[^.\[\]]+|\[\d+\]`).FindAllString(path, -1)
	for i, p := range parts {
		last := i == len(parts)-1
		if strings.HasPrefix(p, "[") {
			var idx int
			fmt.Sscanf(p, "[%d]", &idx)
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return ""
			}
			if last {
				n.Content[idx] = value
				break
			}
			n = n.Content[idx]
			continue
		}
		if n.Kind != yaml.MappingNode {
			return ""
		}
		found := false
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == p {
				if last {
					n.Content[j+1] = value
				} else {
					n = n.Content[j+1]
				}
				found = true
				break
			}
		}
		if !found {
			if !last && (i+1 >= len(parts) || strings.HasPrefix(parts[i+1], "[")) {
				return "" // a list the base does not have
			}
			child := &yaml.Node{Kind: yaml.MappingNode}
			if last {
				child = value
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: p}, child)
			n = child
		}
	}
	out, err := yaml.Marshal(&root)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// checkConfig asserts the contract for one file.
func checkConfig(t *testing.T, f fieldPath, v, doc string) {
	t.Helper()
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
				t.Errorf("%s: %s panicked: %v\n%s", f.path, v, p, doc)
			}
		}()
		_, err = config.Parse([]byte(doc))
	}()
	kind := f.typ.Kind()
	isCount := kind >= reflect.Int && kind <= reflect.Uint64
	isDuration := f.typ == reflect.TypeOf(config.Duration(0))
	if err == nil {
		switch {
		case isCount && v == "-1" && !negativeMeans[trimIndex(f.path)], isDuration && (v == "-1" || v == "-1s"):
			t.Errorf("%s: %s was accepted\n%s", f.path, v, doc)
		case (isCount || isDuration || kind == reflect.Bool) && (v == "x!" || v == "[1, 2]" || v == "{a: 1}"):
			t.Errorf("%s: %s was accepted\n%s", f.path, v, doc)
		}
		return
	}
	var ce config.Errors
	msg := err.Error()
	if !errors.As(err, &ce) && !strings.HasPrefix(msg, "config: ") {
		t.Errorf("%s: %s: the error is not a config error: %v", f.path, v, err)
	}
	if m := findGo(msg); m != "" {
		t.Errorf("%s: %s: the error holds Go (%q):\n%s", f.path, v, m, msg)
	}
	// The field's path is named unless the value made the file refuse
	// something else first (a field it depends on).
	// A name changed is reported where it is referred to, quoting it.
	if !strings.Contains(msg, trimIndex(f.path)) && !strings.Contains(msg, parentPath(f.path)) && !strings.Contains(msg, v) {
		t.Errorf("%s: %s: the error does not name the field:\n%s", f.path, v, msg)
	}
}

// trimIndex drops a trailing [0] (a value given for a whole list is
// reported at the list).
func trimIndex(p string) string { return strings.TrimSuffix(p, "[0]") }

// parentPath is the path of the mapping that holds p's field.
func parentPath(p string) string {
	if i := strings.LastIndexAny(trimIndex(p), ".["); i > 0 {
		return p[:i]
	}
	return p
}

// TestContractDefects: command lines that crashed, never ended, started
// before refusing, exited 1 or 0 for a usage error, blamed the wrong flag
// or spoke Go. Each is refused (exit 2) before anything runs, naming the
// flag, or accepted where it was refused by mistake.
func TestContractDefects(t *testing.T) {
	dir, restore := inTempDir(t)
	defer restore()
	write := func(name, body string) string {
		p := filepath.Join(dir, "..", name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	twoLoops := write("twoloops.yaml", "lcores: [{name: a}, {name: b}]\nports: [{name: p0, spec: \"mem:tl/0\"}, {name: p1, spec: \"mem:tl/1\"}]\n"+
		"pipelines: [{lcore: a, stages: [{kind: sink, port: p0}]}, {lcore: b, stages: [{kind: forwarder, ports: [p0, p1]}]}]\n")
	zeros := write("zeros.yaml", "pool: {frames: 0}\nlcores: [{name: a}]\nports: [{name: p0, spec: \"mem:z/0\"}, {name: p1, spec: \"mem:z/1\"}]\n"+
		"pipelines: [{lcore: a, stages: [{kind: transport, role: initiator, port: p0, ip: 198.18.0.1, peer: t, window: 0}, {kind: transport, name: t, role: target, port: p1, ip: 198.18.0.2}]}]\nrun: {stats_period: 0s}\n")
	typed := write("typed.yaml", "pool: {frames: many}\nlcores: [{name: a, cpu: [0]}]\nports: [{name: p0, spec: \"null:\"}]\nbogus: 1\n"+
		"pipelines: [{lcore: a, stages: [{kind: sink, port: p0, burst: x, colour: red}]}]\nrun: {duration: -1s}\n")
	initiator := []string{"transport", "initiator", "--port", "null:", "--ip", "198.18.0.1", "--peer-mac", "02:00:00:00:00:02", "--peer-ip", "198.18.0.2"}
	target := []string{"transport", "target", "--port", "null:", "--ip", "198.18.0.2"}
	roce := []string{"roce", "--port", "null:", "--port", "null:"}
	with := func(base []string, more ...string) []string { return append(append([]string(nil), base...), more...) }
	for _, c := range []struct {
		args []string
		want []string // in the error; nil: accepted
		not  string   // not in the error
	}{
		// 1. Allocations sized by flags are checked against memory.
		{with(initiator, "--msg-size", "1GiB"), []string{"--msg-size 1GiB", "target region"}, ""},
		{with(target, "--msg-size", "1GiB"), []string{"--msg-size"}, ""},
		{with(initiator, "--msg-size", "256MiB", "--window", "4096"), []string{"--msg-size"}, ""},
		{with(initiator, "--sends", "99999999"), []string{"--sends 99999999 is out of range"}, ""},
		{with(initiator, "--sends", "4096", "--sizes", "1MiB", "--window", "1"), []string{"--sends", "of buffers"}, ""},
		// 4. Bounded inputs.
		{[]string{"run", "--check", "-c", "/dev/zero"}, []string{"larger than 1024 KiB"}, ""},
		{with(roce, "--retire", "99999999"), []string{"--retire 99999999 is out of range: use 0..16777213"}, ""},
		// 5. Checked up front.
		{[]string{"run", "--check", "-c", twoLoops}, []string{`pipelines[1].stages[0].ports[0]: port "p0" is polled by pipelines[0].stages[0] on lcore "a"`}, ""},
		{with(initiator, "--sends", "-1"), []string{"--sends -1"}, ""},
		{with(initiator, "--targets", "-1"), []string{"--targets -1"}, ""},
		{with(target, "--post-recv", "-5"), []string{"--post-recv -5"}, ""},
		{with(initiator, "--dc-sqs", "0"), []string{"--dc-sqs 0"}, ""},
		{with(initiator, "--dc-sqs", "8"), []string{"--dc-sqs does nothing without --targets"}, ""},
		{with(target, "--region-size", "1000000"), []string{"--region-size 1000000 is smaller than the 4194304 B"}, ""},
		{[]string{"run", "--check", "-c", zeros}, []string{"pool.frames: line 1: 0 is not allowed: leave frames out for its default (16384)",
			"pipelines[0].stages[0].window: line 4: 0 is not allowed", "run.stats_period: line 5: 0s is not allowed"}, ""},
		{[]string{"demo", "--driver", "afpacket"}, []string{"--driver does nothing without --veth"}, ""},
		{[]string{"fwd", "--port", "null:", "--mode", "io", "--rate", "1mpps"}, []string{"--rate does nothing unless --mode txonly"}, ""},
		{[]string{"gen", "--port", "null:", "--rx", "--count", "5"}, []string{"--count does nothing with --rx"}, ""},
		{[]string{"gen", "--port", "null:", "--port", "mem:a/0"}, []string{`--port`, "given twice"}, ""},
		{[]string{"fabric", "--port-a", "null:", "--port-b", "null:", "--lcores", "0,1"}, []string{"--lcores 0,1: the fabric runs one poll loop"}, ""},
		// 6. Usage errors exit 2, blame the flag given, speak no Go.
		{[]string{"gen", "--port", "null:", "--metrics", "bogus"}, []string{`--metrics "bogus": give HOST:PORT`}, ""},
		{[]string{"gen", "--port", "null:", "--metrics", "0.0.0.0:9100"}, []string{"--metrics", "--metrics-public"}, ""},
		{[]string{"gen", "--port", "bogus"}, []string{"--port", `"bogus"`}, ""},
		{[]string{"gen", "--port", "afxdp:"}, []string{"--port", "names no afxdp target"}, ""},
		{[]string{"fwd", "--port", "null:", "--mode", "mac"}, []string{"--mode mac needs --peer-mac"}, "PeerMAC"},
		{[]string{"fwd", "--port", "mem:s/0", "--port", "mem:s/0"}, []string{"opens the same port as --port mem:s/0"}, ""},
		{with(target, "--ioi", "maybe"), []string{`--ioi "maybe": use on, off, inorder or sprayed`}, ""},
		{with(roce, "--pmtu", "1000"), []string{"--pmtu 1000 is not an IBA MTU"}, "Options."},
		{with(roce, "--stats-period", "0"), []string{"--stats-period 0s is too short"}, "RunOptions."},
		{[]string{"bench", "ioi", "--delay", "-1s"}, []string{"--delay -1s is negative"}, "Options."},
		{[]string{"help", "foo"}, []string{"help foo: no such command"}, ""},
		{[]string{"completion", "tcsh"}, []string{"completion tcsh: no such subcommand"}, ""},
		{with(roce, "--retire", "-1"), []string{"--retire -1 is out of range"}, "--open"},
		{with(roce, "--first-qpn", "0xffffff"), []string{"--first-qpn 0xffffff is out of range"}, "--slots"},
		{[]string{"gen", "--port", "null:", "--src-mac", "bogus"}, []string{`--src-mac "bogus": give an Ethernet address, e.g. 02:00:00:00:00:01`}, ""},
		{[]string{"gen", "--port", "null:", "--dst-ip", "198.18.0.9-198.18.0.2"}, []string{`--dst-ip "198.18.0.9-198.18.0.2": give LOW-HIGH of one family, low first`}, ""},
		{[]string{"gen", "--port", "null:", "--dst-port", "0"}, []string{`--dst-port "0" is not a UDP port or range`}, ""},
		{[]string{"gen", "--port", "null:", "--vlan", "4095"}, []string{"--vlan 4095: give a VLAN ID 1..4094, or 0 for untagged frames"}, ""},
		{[]string{"gen", "--port", "null:", "--src-port", "0"}, []string{"--src-port 0: give 1..65535"}, ""},
		{[]string{"gen", "--port", "null:", "--src-port", "65535", "--flows", "2"}, []string{"--src-port 65535: give 1..65534, so that the --flows 2 source ports fit under 65536"}, ""},
		{[]string{"gen", "--port", "null:", "--vlan", "7", "--size", "60"}, []string{`--size "60": frames of 60 B are too small for these headers`, "use 64 B or more"}, ""},
		{[]string{"gen", "--port", "null:", "--src-ip", "2001:db8::1", "--dst-ip", "2001:db8::2", "--size", "imix"}, []string{`--size "imix": frames of 60 B are too small`, "use 80 B or more"}, ""},
		{[]string{"gen", "--port", "null:", "--rx", "--vlan", "7"}, []string{"--vlan does nothing with --rx"}, ""},
		{[]string{"gen", "--port", "null:", "--src-ip", "2001:db8::1-2001:db8::9", "--dst-ip", "2001:db8::2", "--vlan", "7", "--size", "84"}, nil, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--timing", "slow"}, []string{`--timing "slow": use fast, original (the capture's own timing), speed=N (its gaps divided by N) or rate`}, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--timing", "speed=0"}, []string{`--timing "speed=0": the speed factor is a number from 0.001 to 1000`}, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--timing", "rate"}, []string{"--timing rate needs --rate: give frames per second"}, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--timing", "rate", "--rate", "0"}, []string{`--rate: rate "0" would send nothing`}, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--timing", "original", "--rate", "1mpps"}, []string{"--rate does nothing unless --timing rate"}, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--size", "128"}, []string{"--size does nothing with --replay"}, ""},
		{[]string{"gen", "--port", "null:", "--replay", "missing.pcap"}, []string{"--replay missing.pcap: no such file or directory"}, ""},
		{[]string{"gen", "--port", "null:", "--replay", twoLoops}, []string{"--replay", "neither a pcap nor a pcapng capture", "give a pcap or pcapng file"}, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--timing", "speed=2.5", "--loop", "3"}, nil, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--timing", "rate", "--rate", "10gbit", "--loop", "0"}, nil, ""},
		{[]string{"gen", "--port", "null:", "--replay", replayInput, "--timing", "recorded"}, nil, ""},
		{with(roce, "--qp", "qpn=0xffffff"), []string{`--qp "qpn=0xffffff": qpn=0xffffff is out of range: use 0x2..0xfffffe`}, "Bind"},
		{with(roce, "--qp", "qpn=1,dest=5"), []string{`--qp "qpn=1,dest=5": qpn=0x1 is out of range`}, ""},
		{with(roce, "--open", "3", "--retire", "1", "--qp", "qpn=4"), []string{`--qp "qpn=4": qpn=0x4 is taken by one of the 3 QPs opened first (0x3..0x5 after 1 retired)`}, ""},
		{with(roce, "--qp", "qpn=0x100", "--qp", "qpn=0x100"), []string{`--qp "qpn=0x100": qpn=0x100 is an earlier QP's number`}, ""},
		{with(roce, "--qp", "dest=9", "--qp", "qpn=2"), []string{`--qp "qpn=2": qpn=0x2 is an earlier QP's number`}, ""},
		{with(roce, "--retire", "1", "--open", "2", "--qp", "qpn=2", "--qp", "qpn=0x100", "--qp", "dest=7"), nil, ""},
		{with(initiator, "--target-delay", "2s"), []string{"--target-delay 2s is too long"}, "Params."},
		{[]string{"gen", "--port", "null:", "--burst", "x"}, []string{`--burst "x": not a whole number`}, "strconv"},
		{[]string{"run", "--check", "-c", typed}, []string{"bogus: line 4: the file has no field \"bogus\"", "pool.frames: line 1: \"many\" is not a whole number",
			"lcores[0].cpu: line 2: a whole number is wanted, not a list", "pipelines[0].stages[0].burst: line 5: \"x\" is not a whole number",
			"pipelines[0].stages[0].colour: line 5: a sink stage has no field \"colour\"", "run.duration: -1s is negative"}, ""},
		// 7. One rule for values.
		{with(target, "--region-size", "8MiB"), nil, ""},
		{[]string{"fabric", "--port-a", "null:", "--port-b", "null:", "--frame-size", "4KiB"}, nil, ""},
		{with(roce, "--pmtu", "1KiB"), nil, ""},
		{[]string{"gen", "--port", "null:", "--rate", "0"}, []string{`--rate: rate "0" would send nothing`, "or max"}, ""},
		{[]string{"gen", "--port", "null:", "--rate", "max"}, nil, ""},
		{with(target, "--lcores", "0"), nil, ""},
		{with(target, "--lcore", "0"), nil, ""},
		{with(target, "--lcore", "4096"), []string{"--lcore 4096: CPU 4096 does not exist"}, ""},
		{with(target, "--lcores", "0,1"), []string{"--lcores"}, ""},
		{[]string{"fabric", "--port-a", "null:", "--port-b", "null:", "--quiet"}, nil, ""},
		{with(roce, "--json", "--metrics", "127.0.0.1:0", "--quiet"), nil, ""},
	} {
		r := contractRun(c.args)
		line := "peregrine " + strings.Join(c.args, " ")
		if r.panicked != nil {
			t.Errorf("%s panicked: %v", line, r.panicked)
			continue
		}
		if c.want == nil {
			if !r.accepted || r.code != exitOK {
				t.Errorf("%s: refused (exit %d), want accepted:\n%s", line, r.code, r.out)
			}
			continue
		}
		if r.accepted || r.code != exitUsage {
			t.Errorf("%s: exit %d, accepted %v; want a usage error (exit 2) before anything runs:\n%s", line, r.code, r.accepted, r.out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.out, w) {
				t.Errorf("%s: the error lacks %q:\n%s", line, w, r.out)
			}
		}
		if c.not != "" && strings.Contains(r.out, c.not) {
			t.Errorf("%s: the error holds %q:\n%s", line, c.not, r.out)
		}
		if m := findGo(r.out); m != "" {
			t.Errorf("%s: the error holds Go (%q):\n%s", line, m, r.out)
		}
	}
}

// Every subcommand's poll loops idle by one default, the config file's
// (adaptive: spin after work, then yield, then sleep), and --help says
// which modes there are.
func TestContractIdleDefault(t *testing.T) {
	require.Equal(t, "adaptive", config.DefaultIdle)
	n := 0
	for _, c := range leafCommands(newRootCommand()) {
		f := c.Flags().Lookup("idle")
		if f == nil {
			continue
		}
		n++
		require.Equal(t, config.DefaultIdle, f.DefValue, c.CommandPath())
		for _, mode := range []string{"adaptive", "busy", "yield", "sleep"} {
			require.Contains(t, f.Usage, mode, c.CommandPath())
		}
	}
	require.GreaterOrEqual(t, n, 6, "subcommands with --idle")
}
