package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryShellOutIsInstalled is the CI-side check: every program a Go
// file or a script of this repository runs is in the table, and
// hack/install-deps.sh installs the package of every one Debian's base
// system lacks.
func TestEveryShellOutIsInstalled(t *testing.T) {
	root, err := repoRoot()
	require.NoError(t, err)
	deps, err := os.ReadFile(filepath.Join(root, "hack", "install-deps.sh"))
	require.NoError(t, err)
	refs, files, err := repoReferences(root)
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk found the repository's files")
	programs := map[string]bool{}
	for _, r := range refs {
		programs[r.program] = true
	}
	// The walk sees the shell-outs this check exists for (a scanner that
	// found nothing would pass everything).
	for _, p := range []string{"ip", "ethtool", "dpdk-testpmd", "dpdk-test", "pkg-config", "gcc", "tshark", "setpriv", "awk"} {
		require.True(t, programs[p], "no reference to %s found: the scanner is broken (or its last use went: drop it from this list)", p)
	}
	for _, p := range check(table, string(deps), refs) {
		t.Error(p)
	}
}

// TestCheckFails feeds the check a Go file and a script that run programs
// the table lacks, and an install-deps.sh missing a package: each is
// reported.
func TestCheckFails(t *testing.T) {
	goSrc := `package x
import "os/exec"
func f(ns interface{ Exec(...string) ([]byte, error) }) {
	exec.Command("frobnicate", "-x").Run()
	exec.CommandContext(nil, "ethtool", "-k").Run()
	exec.LookPath("gadget")
	ns.Exec("widget", "--now")
	exec.Command(name).Run() // not a literal: not seen
}
var name string
`
	shSrc := `#!/usr/bin/env bash
set -euo pipefail
helper() { echo hi; }
helper
ip link show | awk '{print $1}'
x=$(sproing --version)
[[ -n $x ]] || { flibber 2>/dev/null; }
command -v zapper >/dev/null
ip netns exec ns1 tweaker -K eth0
case $1 in up) grep -q foo /etc/hosts ;; esac
"$repo/hack/topo.sh" down
source "$repo/bench/lib.sh"
median 1 2 3
`
	goRefs, err := goReferences("x.go", []byte(goSrc))
	require.NoError(t, err)
	shRefs, err := shellReferences("x.sh", []byte(shSrc))
	require.NoError(t, err)
	var got []string
	for _, r := range append(goRefs, shRefs...) {
		got = append(got, r.where+" "+r.program)
	}
	require.Equal(t, []string{
		"x.go:4 frobnicate", "x.go:5 ethtool", "x.go:6 gadget", "x.go:7 widget",
		"x.sh:5 ip", "x.sh:5 awk", "x.sh:6 sproing", "x.sh:7 flibber", "x.sh:8 zapper",
		"x.sh:9 ip", "x.sh:9 tweaker", "x.sh:10 grep",
	}, got)

	deps := "packages=(\n\tiproute2 # ip\n)\n"
	problems := check(table, deps, append(goRefs, shRefs...))
	text := strings.Join(problems, "\n")
	for _, want := range []string{
		`x.go:4 runs "frobnicate"`, `x.go:6 runs "gadget"`, `x.go:7 runs "widget"`,
		`x.sh:6 runs "sproing"`, `x.sh:7 runs "flibber"`, `x.sh:8 runs "zapper"`, `x.sh:9 runs "tweaker"`,
		"does not install ethtool, the package of ethtool",
		"does not install dpdk-dev, the package of dpdk-testpmd",
	} {
		require.Contains(t, text, want)
	}
	for _, ok := range []string{`"helper"`, `"awk"`, `"grep"`, `"ip"`, "topo.sh"} {
		require.NotContains(t, text, ok)
	}
	require.Equal(t, []string{"hack/install-deps.sh: no complete `packages=(` ... `)` array, one package per line"},
		check(table, "packages=(\n\tgcc\n", nil))
	unsorted := []Tool{{"b", "b", Base}, {"a", "a", Base}}
	require.Contains(t, check(unsorted, deps, nil), "internal/tools: the table is not sorted by Program (Lookup searches it)")
}

func TestFindNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Find("ethtool")
	require.ErrorIs(t, err, ErrMissing)
	require.ErrorContains(t, err, "install the Debian package ethtool (hack/install-deps.sh as root does: apt-get install ethtool)")
	_, err = Find("no-such-tool")
	require.ErrorIs(t, err, ErrUnknown)
	require.False(t, errors.Is(err, ErrMissing))
	tool, ok := Lookup("dpdk-testpmd")
	require.True(t, ok)
	require.Equal(t, "dpdk-dev", tool.Package)
}
