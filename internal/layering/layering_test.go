package layering

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/peregrine-net/peregrine"

// root is how the tables name the package at the module root (the public
// API), whose import path is the module path itself.
const root = "."

// layer names a group of packages by path prefix and what any package in it
// may depend on (directly or not), besides its own group. An allowed entry
// "p" admits p and everything under it; "=p" admits p alone (so "=sched"
// admits the transmit scheduler but not sched/mcsq above core).
type layer struct {
	name    string
	match   func(pkg string) bool
	allowed []string
}

func prefix(p string) func(string) bool {
	return func(pkg string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") }
}

func exactly(p string) func(string) bool {
	return func(pkg string) bool { return pkg == p }
}

// below lists, for the layers from pmd up, everything under them.
var below = []string{"internal", "rings", "cam", "=sched", "core"}

// layers is ARCHITECTURE.md's "Layers", bottom to top. The first match
// decides a package's layer, so more specific entries come first.
var layers = []layer{
	{"internal/release", prefix("internal/release"), nil},
	{"rings", prefix("rings"), []string{"internal/release"}},
	{"cam", prefix("cam"), nil},
	// sched/mcsq sits above the transaction layer it posts on: core and
	// what core uses, never a driver, the fabric, sim, app or above; and
	// nothing in core or below imports it (they admit "=sched" only).
	{"sched/mcsq", prefix("sched/mcsq"), []string{"internal", "rings", "cam", "=sched", "core"}},
	// sched is a leaf the transaction layer drives: it knows time and nothing else.
	{"sched", exactly("sched"), []string{"core/clock"}},
	{"core", prefix("core"), []string{"internal", "rings", "cam", "=sched"}},
	{"pmd", prefix("pmd"), below},
	{"fabric", prefix("fabric"), append(below[:len(below):len(below)], "pmd")},
	{"sim", prefix("sim"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric"}},
	{"app", prefix("app"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim"}},
	// The sidecar's wire (the channel's layout and rings, the control
	// protocol) is leaves: both doors' sides speak it.
	{"host/shm", prefix("host/shm"), nil},
	{"host/ctl", prefix("host/ctl"), nil},
	// The public API at the module root: above the pipeline library,
	// below the harnesses and the binary. Its sidecar door is the client
	// in internal/sidecar, over the wire's leaves.
	{"peregrine (module root)", exactly(root), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim", "app", "host/shm", "host/ctl"}},
	// The sidecar (appliance side, channel, client) over the public API.
	{"host", prefix("host"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim", "app", "=" + root}},
	// The example applications (their mains import the public API only;
	// their test helper starts an in-process sidecar and makes veth
	// pairs): what the root and host stand on, never bench or cmd.
	{"examples", prefix("examples"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim", "app", "=" + root, "host"}},
	{"bench", prefix("bench"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim", "app", "=" + root, "host"}},
	{"cmd", prefix("cmd"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim", "app", "bench", "=" + root, "host"}},
	// The sidecar's client speaks the wire and nothing above it: the
	// public package sits on it, not the reverse.
	{"internal/sidecar", prefix("internal/sidecar"), []string{"host/shm", "host/ctl"}},
	// internal/ holds leaves (release ordering, unit parsing) that import
	// nothing of ours, so every layer above the rings may use them.
	{"internal", prefix("internal"), nil},
}

func layerOf(pkg string) *layer {
	for i := range layers {
		if layers[i].match(pkg) {
			return &layers[i]
		}
	}
	return nil
}

func admits(entry, dep string) bool {
	if p, ok := strings.CutPrefix(entry, "="); ok {
		return dep == p
	}
	if entry == root {
		return dep == root
	}
	return prefix(entry)(dep)
}

func allowedDep(l *layer, dep string) bool {
	if l.match(dep) {
		return true
	}
	for _, a := range l.allowed {
		if admits(a, dep) {
			return true
		}
	}
	return false
}

// coreRule is what one package inside core may import of ours, directly:
// exactly these packages (ARCHITECTURE.md, "Inside core"). A pure package
// is decision logic: besides them it imports only the standard library's
// computation packages (pureStd) — no I/O, no clock of its own, no
// goroutines, no unsafe memory.
type coreRule struct {
	imports []string
	pure    bool
}

// coreRules covers every package under core/: a new one fails the check
// until it is given its arrows here and in ARCHITECTURE.md.
var coreRules = map[string]coreRule{
	"core/clock":           {},
	"core/hist":            {},
	"core/wire":            {},
	"core/wire/wirelayers": {imports: []string{"core/wire"}},
	"core/dix":             {pure: true},
	"core/ioi":             {imports: []string{"core/clock", "core/wire"}, pure: true},
	"core/mbuf":            {imports: []string{"rings", "internal/release"}},
	"core/port":            {imports: []string{"core/mbuf"}},
	"core/lcore":           {imports: []string{"core/clock"}},
	"core/fwd":             {imports: []string{"core/clock", "core/mbuf", "core/port", "core/wire"}},
	"core/qpx":             {imports: []string{"cam", "core/wire"}},
	"core/roce":            {imports: []string{"core/clock", "core/mbuf", "core/port", "core/qpx", "core/wire"}},
	"core/rt/reorder":      {imports: []string{"cam"}},
	"core/rt/swift":        {imports: []string{"core/clock"}},
	// The transport knows nothing of the operations above it: no txn,
	// no IOI, no delivery index, no reorder engine.
	"core/rt": {imports: []string{"cam", "core/clock", "core/mbuf", "core/port", "core/qpx", "core/wire"}},
	// core/shard splits a port among transport endpoints: it reads a
	// frame's CID and knows the CID's shard bits, and nothing above rt.
	"core/shard": {imports: []string{"rings", "core/mbuf", "core/port", "core/rt", "core/wire"}},
	// The transaction layer applies the logic packages on the transport
	// and drives the transmit scheduler; never sched/mcsq, which is above it.
	"core/rt/txn": {imports: []string{"cam", "core/clock", "core/mbuf", "core/port", "core/wire",
		"core/rt", "core/rt/reorder", "core/rt/swift", "core/ioi", "core/dix", "sched"}},
}

// pureStd is what a pure package may import from the standard library.
var pureStd = []string{"errors", "fmt", "math", "math/bits", "strconv", "strings", "slices", "sort", "time"}

// pkgInfo is one package of the module as go list sees it: its direct
// imports (ours relative to the module, the standard library's as they
// are) and its dependencies of ours, direct or not. Test files are not
// counted: a test may reach up to build its fixtures.
type pkgInfo struct {
	imports []string
	deps    []string
}

// violations returns every arrow of g the rules forbid, sorted.
func violations(g map[string]pkgInfo) []string {
	var bad []string
	for pkg, info := range g {
		l := layerOf(pkg)
		if l == nil {
			bad = append(bad, fmt.Sprintf("%s: no layer in internal/layering: add it to the table and to ARCHITECTURE.md", pkg))
			continue
		}
		for _, dep := range info.deps {
			if !allowedDep(l, dep) {
				bad = append(bad, fmt.Sprintf("%s (layer %s) depends on %s, which its layer may not import (allowed: %s)",
					pkg, l.name, dep, strings.Join(l.allowed, ", ")))
			}
		}
		if l.name != "core" {
			continue
		}
		rule, ok := coreRules[pkg]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: no rule in internal/layering's coreRules: give it its arrows there and in ARCHITECTURE.md (Inside core)", pkg))
			continue
		}
		for _, imp := range info.imports {
			switch {
			case slices.Contains(rule.imports, imp):
			case isOurs(g, imp):
				bad = append(bad, fmt.Sprintf("%s imports %s: inside core it may import only %v", pkg, imp, rule.imports))
			case rule.pure && !slices.Contains(pureStd, imp):
				bad = append(bad, fmt.Sprintf("%s is pure logic and imports %s (allowed from the standard library: %v)", pkg, imp, pureStd))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// isOurs reports whether imp names a package of the module: one go list
// listed, or one under a top-level directory of ours (a synthetic graph
// need not list every package it names).
func isOurs(g map[string]pkgInfo, imp string) bool {
	if _, ok := g[imp]; ok {
		return true
	}
	return layerOf(imp) != nil
}

// ourName turns an import path into the tables' name: relative to the
// module, root for the module's own package, ok false for anything else.
func ourName(path string) (string, bool) {
	if path == module {
		return root, true
	}
	rest, ok := strings.CutPrefix(path, module+"/")
	return rest, ok
}

// listModule runs go list over the module.
func listModule(t *testing.T) map[string]pkgInfo {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH; the layering check needs `go list`")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", module+"/...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	g := map[string]pkgInfo{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "|")
		if len(parts) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		pkg, ok := ourName(parts[0])
		if !ok {
			continue
		}
		var info pkgInfo
		for _, imp := range strings.Fields(parts[1]) {
			if name, ok := ourName(imp); ok {
				imp = name
			}
			info.imports = append(info.imports, imp)
		}
		for _, dep := range strings.Fields(parts[2]) {
			if name, ok := ourName(dep); ok {
				info.deps = append(info.deps, name)
			}
		}
		g[pkg] = info
	}
	return g
}

// TestImportsRunOneWay fails when a package depends, directly or through
// another package, on one its layer may not import (core on pmd, a product
// package on bench, anything on cmd …), or when a package inside core
// imports what its rule does not list (core/ioi anything but core/clock and
// core/wire, core/rt the transaction layer, core/dix anything of ours or of
// the standard library's I/O).
func TestImportsRunOneWay(t *testing.T) {
	g := listModule(t)
	if len(g) < 20 {
		t.Fatalf("only %d packages listed: the check is not seeing the module", len(g))
	}
	for _, v := range violations(g) {
		t.Error(v)
	}
	// Every rule names a package that exists: a rule left behind by a
	// rename would keep nothing.
	for pkg := range coreRules {
		if _, ok := g[pkg]; !ok {
			t.Errorf("coreRules names %s, which go list does not list: remove or rename it (and in ARCHITECTURE.md)", pkg)
		}
	}
}

// TestLayerTableCatchesAViolation proves the layer table can fail: each
// forbidden arrow is refused, each permitted one admitted.
func TestLayerTableCatchesAViolation(t *testing.T) {
	for _, c := range []struct {
		pkg, dep string
		ok       bool
	}{
		{"core/rt", "pmd/mem", false},
		{"core/rt", "fabric", false},
		{"sim", "app/traffic", false},
		{"app/traffic", "bench/report", false},
		{"rings", "core/mbuf", false},
		{"sched", "core/rt", false},
		{"core/rt/txn", "sched", true},
		{"core/rt/txn", "sched/mcsq", false},
		{"pmd/mem", "sched/mcsq", false},
		{"sched/mcsq", "core/rt/txn", true},
		{"sched/mcsq", "fabric", false},
		{"sched/mcsq", "app", false},
		{"fabric", "pmd/mem", true},
		{"app", "sched/mcsq", true},
		{"app", root, false},
		{root, "app", true},
		{root, "bench/report", false},
		{root, "internal/sidecar", true},
		{root, "host", false},
		{"internal/sidecar", root, false},
		{"internal/sidecar", "host/shm", true},
		{"host/shm", root, false},
		{"host", root, true},
		{"cmd/peregrine", root, true},
		{"cmd/peregrine", "bench/foundation", true},
	} {
		l := layerOf(c.pkg)
		if got := allowedDep(l, c.dep); got != c.ok {
			t.Errorf("%s -> %s: allowed=%v, want %v", c.pkg, c.dep, got, c.ok)
		}
	}
}

// TestCheckFailsOnForbiddenGraph feeds the whole check a synthetic import
// graph: a clean one passes, and each forbidden arrow added to it is
// reported, naming the package and the import.
func TestCheckFailsOnForbiddenGraph(t *testing.T) {
	clean := func() map[string]pkgInfo {
		return map[string]pkgInfo{
			"core/clock":  {imports: []string{"time"}},
			"core/wire":   {imports: []string{"encoding/binary", "golang.org/x/sys/cpu"}},
			"core/dix":    {imports: []string{"errors", "fmt"}},
			"core/ioi":    {imports: []string{"fmt", "math", "core/clock", "core/wire"}, deps: []string{"core/clock", "core/wire"}},
			"core/rt":     {imports: []string{"cam", "core/wire"}, deps: []string{"cam", "core/wire"}},
			"core/rt/txn": {imports: []string{"core/rt", "core/ioi", "sched"}, deps: []string{"core/rt", "core/ioi", "sched", "cam", "core/wire", "core/clock"}},
			"sched":       {imports: []string{"core/clock"}, deps: []string{"core/clock"}},
			"sched/mcsq":  {imports: []string{"core/rt/txn"}, deps: []string{"core/rt/txn", "core/rt", "sched"}},
			"cam":         {},
		}
	}
	if v := violations(clean()); len(v) != 0 {
		t.Fatalf("a clean graph was refused: %v", v)
	}
	for _, c := range []struct {
		name      string
		pkg       string
		imp       string // added to imports and deps
		wantParts []string
	}{
		{"ioi on the transport", "core/ioi", "core/rt", []string{"core/ioi imports core/rt"}},
		{"ioi on the CAM", "core/ioi", "cam", []string{"core/ioi imports cam"}},
		{"dix on the clock", "core/dix", "core/clock", []string{"core/dix imports core/clock"}},
		{"dix doing I/O", "core/dix", "os", []string{"core/dix is pure logic", "imports os"}},
		{"ioi using unsafe", "core/ioi", "unsafe", []string{"core/ioi is pure logic", "imports unsafe"}},
		{"dix on a module outside", "core/dix", "golang.org/x/sys/unix", []string{"core/dix is pure logic"}},
		{"rt on txn", "core/rt", "core/rt/txn", []string{"core/rt imports core/rt/txn"}},
		{"rt on ioi", "core/rt", "core/ioi", []string{"core/rt imports core/ioi"}},
		{"txn on mcsq", "core/rt/txn", "sched/mcsq", []string{"core/rt/txn (layer core) depends on sched/mcsq", "core/rt/txn imports sched/mcsq"}},
		{"sched on mcsq", "sched", "sched/mcsq", []string{"sched (layer sched) depends on sched/mcsq"}},
		{"mcsq on a driver", "sched/mcsq", "pmd/mem", []string{"sched/mcsq (layer sched/mcsq) depends on pmd/mem"}},
		{"core on the fabric", "core/rt", "fabric", []string{"core/rt (layer core) depends on fabric"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := clean()
			info := g[c.pkg]
			info.imports = append(info.imports, c.imp)
			if isOurs(g, c.imp) {
				info.deps = append(info.deps, c.imp)
			}
			g[c.pkg] = info
			v := strings.Join(violations(g), "\n")
			for _, want := range c.wantParts {
				if !strings.Contains(v, want) {
					t.Errorf("violations do not report %q:\n%s", want, v)
				}
			}
		})
	}
	t.Run("a core package without a rule", func(t *testing.T) {
		g := clean()
		g["core/newthing"] = pkgInfo{}
		if v := strings.Join(violations(g), "\n"); !strings.Contains(v, "core/newthing: no rule") {
			t.Errorf("a core package without a rule passed:\n%s", v)
		}
	})
	t.Run("a package without a layer", func(t *testing.T) {
		g := clean()
		g["newtop"] = pkgInfo{}
		if v := strings.Join(violations(g), "\n"); !strings.Contains(v, "newtop: no layer") {
			t.Errorf("a package without a layer passed:\n%s", v)
		}
	})
}

// TestArchitectureStatesTheCoreRules keeps ARCHITECTURE.md's "Inside core"
// table and coreRules one list: a package, its imports and whether it is
// pure logic must read the same in both.
func TestArchitectureStatesTheCoreRules(t *testing.T) {
	doc, err := os.ReadFile("../../ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	stated, err := statedCoreRules(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffRules(stated, coreRules) {
		t.Error(d)
	}
}

// TestArchitectureCheckCatchesADrift proves the comparison can fail: a
// table that drops an import, adds one, loses "pure logic" or a package is
// reported.
func TestArchitectureCheckCatchesADrift(t *testing.T) {
	const good = "### Inside core\n\n```\ncore/ioi   core/wire, core/clock   (pure logic)\ncore/rt    cam,\n           core/wire\ncore/dix, core/hist   nothing of ours\n```\n"
	want := map[string]coreRule{
		"core/ioi":  {imports: []string{"core/clock", "core/wire"}, pure: true},
		"core/rt":   {imports: []string{"core/wire", "cam"}},
		"core/dix":  {},
		"core/hist": {},
	}
	stated, err := statedCoreRules(good)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffRules(stated, want); len(d) != 0 {
		t.Fatalf("a table that agrees was refused: %v", d)
	}
	for _, c := range []struct{ name, from, to, report string }{
		{"an import dropped", "core/rt    cam,", "core/rt    ", "core/rt"},
		{"an import added", "core/wire, core/clock   (pure", "core/wire, core/clock, cam   (pure", "core/ioi"},
		{"pure logic lost", "   (pure logic)", "", "core/ioi"},
		{"a package missing", "core/dix, core/hist", "core/hist", "core/dix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stated, err := statedCoreRules(strings.Replace(good, c.from, c.to, 1))
			if err != nil {
				t.Fatal(err)
			}
			if d := strings.Join(diffRules(stated, want), "\n"); !strings.Contains(d, c.report) {
				t.Errorf("the drift was not reported for %s:\n%s", c.report, d)
			}
		})
	}
}

// statedCoreRules parses the code block under "### Inside core": a line
// names one or more packages (comma-separated) and, after two or more
// spaces, their imports (comma-separated, "nothing of ours" for none),
// optionally ending "(pure logic)"; an indented line continues the imports
// of the line above.
func statedCoreRules(doc string) (map[string]coreRule, error) {
	_, rest, ok := strings.Cut(doc, "### Inside core")
	if !ok {
		return nil, fmt.Errorf(`ARCHITECTURE.md has no "### Inside core" section`)
	}
	_, rest, ok = strings.Cut(rest, "```\n")
	if !ok {
		return nil, fmt.Errorf(`"Inside core" has no code block`)
	}
	block, _, _ := strings.Cut(rest, "```")
	rules := map[string]coreRule{}
	var current []string
	for _, line := range strings.Split(block, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		text := line
		if line[0] != ' ' {
			var pkgs string
			pkgs, text, _ = strings.Cut(line, "  ")
			current = current[:0]
			for _, p := range strings.Split(pkgs, ",") {
				current = append(current, strings.TrimSpace(p))
				rules[strings.TrimSpace(p)] = coreRule{}
			}
		}
		text = strings.TrimSpace(text)
		pure := strings.HasSuffix(text, "(pure logic)")
		text = strings.TrimSpace(strings.TrimSuffix(text, "(pure logic)"))
		var imports []string
		if text != "nothing of ours" {
			for _, imp := range strings.Split(text, ",") {
				if imp = strings.TrimSpace(imp); imp != "" {
					imports = append(imports, imp)
				}
			}
		}
		for _, p := range current {
			r := rules[p]
			r.imports = append(r.imports, imports...)
			r.pure = r.pure || pure
			rules[p] = r
		}
	}
	return rules, nil
}

// diffRules lists where stated and rules disagree, sorted.
func diffRules(stated, rules map[string]coreRule) []string {
	var d []string
	for pkg, r := range rules {
		s, ok := stated[pkg]
		if !ok {
			d = append(d, fmt.Sprintf("%s has a rule in coreRules but no line in ARCHITECTURE.md's \"Inside core\"", pkg))
			continue
		}
		a, b := slices.Sorted(slices.Values(s.imports)), slices.Sorted(slices.Values(r.imports))
		if !slices.Equal(a, b) {
			d = append(d, fmt.Sprintf("%s: ARCHITECTURE.md lists imports %v, coreRules %v", pkg, a, b))
		}
		if s.pure != r.pure {
			d = append(d, fmt.Sprintf("%s: pure logic in ARCHITECTURE.md %v, in coreRules %v", pkg, s.pure, r.pure))
		}
	}
	for pkg := range stated {
		if _, ok := rules[pkg]; !ok {
			d = append(d, fmt.Sprintf("%s has a line in ARCHITECTURE.md's \"Inside core\" but no rule in coreRules", pkg))
		}
	}
	sort.Strings(d)
	return d
}
