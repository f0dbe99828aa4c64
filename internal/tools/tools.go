package tools

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// ErrMissing is wrapped by Find when a program is not in PATH.
var ErrMissing = errors.New("tools: program not installed")

// ErrUnknown is wrapped by Find for a program the table does not name.
var ErrUnknown = errors.New("tools: program not in internal/tools' table")

// Origin says where a program comes from.
type Origin int

const (
	// Listed programs come from a package hack/install-deps.sh installs.
	Listed Origin = iota
	// Base programs come from a Debian package every installation has
	// (Essential, or Priority required: present even in a minbase
	// debootstrap), so install-deps.sh need not list it.
	Base
	// Toolchain is the Go toolchain itself, which runs the tests.
	Toolchain
	// Optional programs are looked for and done without: sudo, which the
	// bench scripts use only to re-run themselves as root.
	Optional
)

// Tool is one program and the Debian package that installs it.
type Tool struct {
	Program string
	Package string // Debian package; "" for Toolchain
	Origin  Origin
}

// table lists every program a test, benchmark or script runs. Sorted by
// Program (the test checks).
var table = []Tool{
	{"apt-get", "apt", Base},
	{"awk", "mawk", Base},
	{"bash", "bash", Base},
	{"cat", "coreutils", Base},
	{"cut", "coreutils", Base},
	{"dirname", "coreutils", Base},
	{"dpdk-test", "dpdk-dev", Listed},
	{"dpdk-testpmd", "dpdk-dev", Listed},
	{"dpkg-query", "dpkg", Base},
	{"ethtool", "ethtool", Listed},
	{"gcc", "gcc", Listed},
	{"git", "git", Listed},
	{"go", "", Toolchain},
	{"grep", "grep", Base},
	{"id", "coreutils", Base},
	{"ip", "iproute2", Listed},
	{"ls", "coreutils", Base},
	{"mkdir", "coreutils", Base},
	{"mktemp", "coreutils", Base},
	{"mv", "coreutils", Base},
	{"nproc", "coreutils", Base},
	{"nstat", "iproute2", Listed},
	{"perf", "linux-perf", Listed},
	{"pkg-config", "pkg-config", Listed},
	{"python3", "python3-scapy", Listed},
	{"rm", "coreutils", Base},
	{"sed", "sed", Base},
	{"seq", "coreutils", Base},
	{"setpriv", "util-linux", Base},
	{"sh", "dash", Base},
	{"sleep", "coreutils", Base},
	{"sockperf", "sockperf", Listed},
	{"sort", "coreutils", Base},
	{"sudo", "sudo", Optional},
	{"tar", "tar", Base},
	{"taskset", "util-linux", Base},
	{"tee", "coreutils", Base},
	{"timeout", "coreutils", Base},
	{"true", "coreutils", Base},
	{"tshark", "tshark", Listed},
}

// Table returns a copy of every known program, sorted by Program.
func Table() []Tool { return slices.Clone(table) }

// Lookup returns the table's entry for program.
func Lookup(program string) (Tool, bool) {
	i, ok := slices.BinarySearchFunc(table, program, func(t Tool, p string) int { return strings.Compare(t.Program, p) })
	if !ok {
		return Tool{}, false
	}
	return table[i], true
}

// Hint tells how to install program, e.g. "install the Debian package
// ethtool (hack/install-deps.sh as root does)".
func Hint(program string) string {
	t, ok := Lookup(program)
	switch {
	case !ok:
		return fmt.Sprintf("%q is not in internal/tools' table; add it there with its Debian package, and the package to hack/install-deps.sh", program)
	case t.Origin == Toolchain:
		return "install the Go toolchain (go.mod names the version) and put it in PATH"
	case t.Origin == Listed:
		return fmt.Sprintf("install the Debian package %s (hack/install-deps.sh as root does: apt-get install %s)", t.Package, t.Package)
	default:
		return fmt.Sprintf("install the Debian package %s (apt-get install %s)", t.Package, t.Package)
	}
}

// Find returns program's path, or an error that names the package to
// install (wrapping ErrMissing) or says the program is unknown (wrapping
// ErrUnknown: every program run must be in the table).
func Find(program string) (string, error) {
	if _, ok := Lookup(program); !ok {
		return "", fmt.Errorf("%w: %s", ErrUnknown, Hint(program))
	}
	path, err := exec.LookPath(program)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found in PATH: %s", ErrMissing, program, Hint(program))
	}
	return path, nil
}
