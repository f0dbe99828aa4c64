package tools

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The shell-out check: every program a Go file or a shell script of the
// repository runs must be in the table, and every package the table needs
// must be listed by hack/install-deps.sh. check is kept apart from the
// repository walk so that its own test can feed it sources that must fail.

// reference is one place that runs (or looks for) a program.
type reference struct {
	where   string // file:line
	program string
}

// goSite is a call that takes a program name: Name called as pkg.Name or
// recv.Name when Qual is "*", as Qual.Name when Qual is a package name, or
// as a plain Name when Qual is ""; Arg is the argument holding the program
// (-1: every argument after the first, as Require(t, progs...)).
type goSite struct {
	qual, name string
	arg        int
}

var goSites = []goSite{
	{"exec", "Command", 0},
	{"exec", "CommandContext", 1},
	{"exec", "LookPath", 0},
	{"*", "Exec", 0},         // pmd/netns NS.Exec(argv...)
	{"", "run", 0},           // pmd/netns run(name, args...)
	{"", "lookTool", 0},      // bench/anchor
	{"", "runTool", 1},       // bench/anchor runTool(ctx, path, env, args...)
	{"", "groupCommand", 1},  // bench/anchor
	{"", "requireTools", -1}, // bench/anchor's tests
	{"toolstest", "Require", -1},
	{"toolstest", "Path", 1},
	{"tools", "Find", 0},
	{"", "Find", 0},
}

// goReferences returns the string-literal programs src names at goSites.
func goReferences(path string, src []byte) ([]reference, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var refs []reference
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		var qual, name string
		switch fn := call.Fun.(type) {
		case *ast.Ident:
			name = fn.Name
		case *ast.SelectorExpr:
			name = fn.Sel.Name
			if id, ok := fn.X.(*ast.Ident); ok {
				qual = id.Name
			} else {
				qual = "?"
			}
		default:
			return true
		}
		for _, s := range goSites {
			if s.name != name || !(s.qual == qual || s.qual == "*" && qual != "") {
				continue
			}
			args := call.Args
			switch {
			case s.arg < 0 && len(args) > 0:
				args = args[1:]
			case s.arg >= 0 && s.arg < len(args):
				args = args[s.arg : s.arg+1]
			default:
				args = nil
			}
			for _, a := range args {
				lit, ok := a.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				prog, err := strconv.Unquote(lit.Value)
				if err != nil || prog == "" {
					continue
				}
				refs = append(refs, reference{fmt.Sprintf("%s:%d", path, fset.Position(lit.Pos()).Line), prog})
			}
			break
		}
		return true
	})
	return refs, nil
}

// shellBuiltins are bash builtins and keywords: never a program to install.
var shellBuiltins = map[string]bool{}

func init() {
	for _, b := range strings.Fields(`. : [ alias bg bind break builtin caller cd command compgen complete
		continue declare dirs disown echo enable eval exec exit export false fc fg getopts hash help
		history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly
		return set shift shopt source suspend test times trap true type typeset ulimit umask
		unalias unset wait`) {
		shellBuiltins[b] = true
	}
}

// shellReferences returns the programs a shell script runs: the literal
// first word of every simple command that is neither a builtin nor a
// function the script defines, looking through the wrappers that run
// another program (exec, command -v, env, sudo, taskset, timeout, nohup,
// ip netns exec NS).
func shellReferences(path string, src []byte) ([]reference, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(string(src)), path)
	if err != nil {
		return nil, err
	}
	funcs := map[string]bool{}
	if err := addFuncs(f, path, funcs, 0); err != nil {
		return nil, err
	}
	var refs []reference
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]string, len(call.Args))
		for i, w := range call.Args {
			words[i] = w.Lit() // "" unless the word is a plain literal
		}
		line := call.Args[0].Pos().Line()
		for len(words) > 0 {
			w := words[0]
			next := 1
			switch {
			case w == "exec" || w == "nohup" || w == "builtin":
			case w == "command":
				if len(words) > 1 && words[1] == "-v" {
					next = 2
				}
			case w == "env":
				for next < len(words) && (strings.Contains(words[next], "=") || strings.HasPrefix(words[next], "-")) {
					next++
				}
			case w == "sudo":
				refs = append(refs, reference{fmt.Sprintf("%s:%d", path, line), w})
				for next < len(words) && strings.HasPrefix(words[next], "-") {
					next++
				}
			case w == "timeout":
				refs = append(refs, reference{fmt.Sprintf("%s:%d", path, line), w})
				next = 2
			case w == "taskset":
				refs = append(refs, reference{fmt.Sprintf("%s:%d", path, line), w})
				next = 2
				if len(words) > 1 && strings.HasPrefix(words[1], "-") {
					next = 3
				}
			case w == "ip" && len(words) > 4 && words[1] == "netns" && words[2] == "exec":
				refs = append(refs, reference{fmt.Sprintf("%s:%d", path, line), w})
				next = 4
			default:
				if w != "" && !shellBuiltins[w] && !funcs[w] && !strings.Contains(w, "/") {
					refs = append(refs, reference{fmt.Sprintf("%s:%d", path, line), w})
				}
				next = len(words)
			}
			words = words[min(next, len(words)):]
		}
		return true
	})
	return refs, nil
}

// addFuncs adds to funcs the functions f defines and those of the scripts
// it sources (`source "$repo/bench/lib.sh"`: the path's last literal part,
// from the repository's root or the script's folder), so a shared helper is
// not taken for a program.
func addFuncs(f *syntax.File, path string, funcs map[string]bool, depth int) error {
	var sourced []string
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.FuncDecl:
			funcs[n.Name.Value] = true
		case *syntax.CallExpr:
			if len(n.Args) == 2 && (n.Args[0].Lit() == "source" || n.Args[0].Lit() == ".") {
				if tail := lastLiteral(n.Args[1].Parts); strings.HasSuffix(tail, ".sh") {
					sourced = append(sourced, strings.TrimPrefix(tail, "/"))
				}
			}
		}
		return true
	})
	if len(sourced) == 0 || depth > 3 {
		return nil
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	for _, rel := range sourced {
		var src []byte
		for _, p := range []string{filepath.Join(root, rel), filepath.Join(root, filepath.Dir(path), rel)} {
			if src, err = os.ReadFile(p); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s sources %s, which is not found from the repository's root or beside it", path, rel)
		}
		lib, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(string(src)), rel)
		if err != nil {
			return err
		}
		if err := addFuncs(lib, rel, funcs, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// lastLiteral is the last literal text of a word's parts, looking into
// double quotes: "/bench/lib.sh" of "$repo/bench/lib.sh".
func lastLiteral(parts []syntax.WordPart) string {
	for i := len(parts) - 1; i >= 0; i-- {
		switch p := parts[i].(type) {
		case *syntax.Lit:
			return p.Value
		case *syntax.DblQuoted:
			return lastLiteral(p.Parts)
		default:
			return ""
		}
	}
	return ""
}

// installDepsPackages returns the packages of install-deps.sh's
// `packages=(...)` array: the first word of each line inside it.
func installDepsPackages(script string) ([]string, error) {
	var pkgs []string
	in, seen := false, false
	sc := bufio.NewScanner(strings.NewReader(script))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == "packages=(":
			in, seen = true, true
		case in && line == ")":
			in = false
		case in && line != "" && !strings.HasPrefix(line, "#"):
			pkgs = append(pkgs, strings.Fields(line)[0])
		}
	}
	if !seen || in {
		return nil, fmt.Errorf("no complete `packages=(` ... `)` array, one package per line")
	}
	return pkgs, nil
}

// check returns one line per problem: a program not in tab, a package of
// tab missing from installDeps, or a table out of order.
func check(tab []Tool, installDeps string, refs []reference) []string {
	var problems []string
	pkgs, err := installDepsPackages(installDeps)
	if err != nil {
		return []string{"hack/install-deps.sh: " + err.Error()}
	}
	if !slices.IsSortedFunc(tab, func(a, b Tool) int { return strings.Compare(a.Program, b.Program) }) {
		problems = append(problems, "internal/tools: the table is not sorted by Program (Lookup searches it)")
	}
	known := map[string]Tool{}
	for _, t := range tab {
		known[t.Program] = t
		if t.Origin == Listed && !slices.Contains(pkgs, t.Package) {
			problems = append(problems, fmt.Sprintf("hack/install-deps.sh does not install %s, the package of %s (add it to packages=(...))", t.Package, t.Program))
		}
	}
	for _, r := range refs {
		if _, ok := known[r.program]; !ok {
			problems = append(problems, fmt.Sprintf("%s runs %q, which internal/tools' table does not name (add it with its Debian package, and the package to hack/install-deps.sh)", r.where, r.program))
		}
	}
	return problems
}

// repoRoot is the directory holding go.mod, above this package.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// repoReferences scans every Go file and every shell script (*.sh, and
// .ci/run) of the repository at root.
func repoReferences(root string) (refs []reference, files int, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci" || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		var scan func(string, []byte) ([]reference, error)
		switch {
		case filepath.Dir(rel) == filepath.Join("internal", "tools") && strings.HasSuffix(rel, "_test.go"):
			return nil // this check's own test feeds it programs that must fail
		case strings.HasSuffix(path, ".go"):
			scan = goReferences
		case strings.HasSuffix(path, ".sh") || rel == filepath.Join(".ci", "run"):
			scan = shellReferences
		default:
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		r, err := scan(rel, src)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		refs = append(refs, r...)
		files++
		return nil
	})
	return refs, files, err
}
