package layering

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/peregrine-net/peregrine/"

// layer names a group of packages by path prefix and the prefixes any
// package in it may depend on (directly or not), besides its own group.
type layer struct {
	name    string
	match   func(pkg string) bool
	allowed []string
}

func prefix(p string) func(string) bool {
	return func(pkg string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") }
}

// layers is ARCHITECTURE.md's "Imports run one way", bottom to top. The first
// match decides a package's layer, so more specific entries come first.
var layers = []layer{
	{"internal/release", prefix("internal/release"), nil},
	{"rings", prefix("rings"), []string{"internal/release"}},
	{"cam", prefix("cam"), nil},
	{"core/clock", prefix("core/clock"), nil},
	// sched/mcsq (SEEDS §S3) sits above the transaction layer it posts on:
	// core and what core uses, never a driver, the fabric, sim, app or above.
	{"sched/mcsq", prefix("sched/mcsq"), []string{"internal", "rings", "cam", "sched", "core"}},
	// sched is a leaf the transaction layer drives: it knows time and nothing else.
	{"sched", func(p string) bool { return p == "sched" }, []string{"core/clock"}},
	{"core", prefix("core"), []string{"internal", "rings", "cam", "sched"}},
	{"pmd", prefix("pmd"), []string{"internal", "rings", "cam", "sched", "core"}},
	{"fabric", prefix("fabric"), []string{"internal", "rings", "cam", "sched", "core", "pmd"}},
	{"sim", prefix("sim"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric"}},
	{"app", prefix("app"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim"}},
	{"bench", prefix("bench"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim", "app"}},
	// The public API at the module root sits on the transport and the
	// drivers; nothing of ours imports it.
	{"peregrine", func(p string) bool { return p+"/" == module }, []string{"internal", "rings", "cam", "sched", "core", "pmd"}},
	{"cmd", prefix("cmd"), []string{"internal", "rings", "cam", "sched", "core", "pmd", "fabric", "sim", "app", "bench"}},
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

// TestImportsRunOneWay fails when a package depends, directly or through
// another package, on one its layer may not import (core on pmd, a product
// package on bench, anything on cmd …). Test files are not counted: a test
// may reach up to build its fixtures.
func TestImportsRunOneWay(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH; the layering check needs `go list`")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	checked := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], module)
		l := layerOf(pkg)
		if l == nil {
			t.Errorf("%s: no layer in internal/layering: add it to the table and to ARCHITECTURE.md", pkg)
			continue
		}
		checked++
		for _, dep := range fields[1:] {
			if !strings.HasPrefix(dep, module) {
				continue
			}
			dep = strings.TrimPrefix(dep, module)
			if l.match(dep) || allowedDep(l, dep) {
				continue
			}
			t.Errorf("%s (layer %s) depends on %s, which its layer may not import (allowed: %s)",
				pkg, l.name, dep, strings.Join(l.allowed, ", "))
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages listed: the check is not seeing the module", checked)
	}
}

func allowedDep(l *layer, dep string) bool {
	for _, a := range l.allowed {
		if prefix(a)(dep) {
			return true
		}
	}
	return false
}

// TestLayerTableCatchesAViolation proves the check can fail: core importing
// pmd must be refused by the table.
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
		{"sched/mcsq", "core/rt/txn", true},
		{"sched/mcsq", "fabric", false},
		{"sched/mcsq", "app", false},
		{"fabric", "pmd/mem", true},
		{"cmd/peregrine", "bench/foundation", true},
	} {
		l := layerOf(c.pkg)
		got := l.match(c.dep) || allowedDep(l, c.dep)
		if got != c.ok {
			t.Errorf("%s -> %s: allowed=%v, want %v", c.pkg, c.dep, got, c.ok)
		}
	}
}
