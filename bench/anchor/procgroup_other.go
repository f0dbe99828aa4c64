//go:build !unix

package anchor

import "os/exec"

// setProcessGroup leaves the default cancel (kill the child only): DPDK's
// tools run on Linux, so elsewhere they are never found anyway.
func setProcessGroup(*exec.Cmd) {}
