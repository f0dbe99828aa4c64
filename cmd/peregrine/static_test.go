package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildCommand is the README's build line; the test builds exactly that
// (to a temporary path) and checks the promise next to it.
const buildCommand = "CGO_ENABLED=0 go build -o /usr/local/bin/peregrine ./cmd/peregrine"

// TestDocumentedBuildIsStatic: the README says "one static binary"; the
// build it documents must link nothing at run time (no ELF interpreter, no
// needed shared library), and --version must name the version, the Go
// toolchain and the commit.
func TestDocumentedBuildIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), buildCommand) {
		t.Fatalf("README.md no longer documents %q: update buildCommand and this test with it", buildCommand)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool to build with: %v", err)
	}
	// In a git clone go build stamps the commit (-buildvcs=auto; said
	// explicitly, as GOFLAGS may turn it off). In a git worktree (.git is
	// a file) it cannot, and the commit is given with -X main.commit.
	head, gitErr := exec.Command("git", "rev-parse", "HEAD").Output()
	inGit := gitErr == nil
	vcs, ldflags := "-buildvcs=false", "-X main.version=v9.9.9-test"
	if inGit {
		if st, err := os.Stat("../../.git"); err == nil && st.IsDir() {
			vcs = "-buildvcs=true"
		} else {
			ldflags += " -X main.commit=" + strings.TrimSpace(string(head))
		}
	}
	bin := filepath.Join(t.TempDir(), "peregrine")
	build := exec.Command(goTool, "build", vcs, "-ldflags", ldflags, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", buildCommand, err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary names an ELF interpreter (PT_INTERP): it is linked dynamically")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries (DT_NEEDED) %v", libs)
	}

	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("peregrine --version: %v\n%s", err, out)
	}
	v := string(out)
	if !regexp.MustCompile(`^peregrine v9\.9\.9-test \(go1\.[0-9.]+[^,]*, commit [^)]+\)\n$`).MatchString(v) {
		t.Errorf("peregrine --version = %q, want the version, the Go version and the commit", v)
	}
	if inGit && !regexp.MustCompile(`commit [0-9a-f]{40}(\+dirty)?\)`).MatchString(v) {
		t.Errorf("peregrine --version = %q: built in a git checkout, the commit should be named", v)
	}
}
