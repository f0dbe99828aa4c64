// Package tools names every external program the repository's tests,
// benchmarks and scripts run, and the Debian package that installs each,
// so that a missing program is reported with what to install instead of
// `exec: "ethtool": executable file not found`.
//
// The table is the single source: hack/install-deps.sh installs the package
// of every program in it that Debian's base system lacks, and this
// package's test fails when a Go file or a shell script runs a program the
// table does not know, or when install-deps.sh does not list a package the
// table needs. Adding a shell-out therefore means one line here and, for a
// new package, one line in install-deps.sh.
//
// Tests call toolstest.Require, which skips (not root: the suite cannot
// install anything) or fails (root: hack/install-deps.sh should have
// installed it) with the package's name.
//
// This package moves no packets and owns no buffers.
package tools
