package anchor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// ErrNotInstalled is wrapped by every error caused by a missing DPDK tool
// (dpdk-test, dpdk-testpmd) or by what the mempool harness needs to build
// (gcc, pkg-config, libdpdk).
var ErrNotInstalled = errors.New("dpdk tools not installed")

// ErrUnexpectedOutput is wrapped when a tool ran but its output lacks the
// figure this package looks for (a different DPDK version, or a failed run).
var ErrUnexpectedOutput = errors.New("unexpected dpdk tool output")

const installHint = "run hack/install-deps.sh as root"

// ealBaseArgs are the EAL options every tool runs with here: no hugepages
// reserved, no PCI devices, and no shared config so that concurrent runs do
// not fight over /var/run/dpdk/rte (and non-root users can run them).
func ealBaseArgs() []string {
	return []string{"--no-huge", "--no-pci", "--no-shconf", "--no-telemetry"}
}

// killGrace is how long a killed tool may take to close its output.
const killGrace = 5 * time.Second

func lookTool(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("anchor: %s not found in PATH (%s): %w", name, installHint, ErrNotInstalled)
	}
	return path, nil
}

// groupCommand returns a command that runs in its own process group; when
// ctx ends the whole group gets SIGKILL, so a DPDK tool's worker threads or
// children cannot outlive the benchmark.
func groupCommand(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	setProcessGroup(cmd)
	cmd.WaitDelay = killGrace
	return cmd
}

// runTool runs a command to completion and returns stdout and stderr
// interleaved as the tool wrote them.
func runTool(ctx context.Context, path string, env []string, args ...string) (string, error) {
	cmd := groupCommand(ctx, path, args...)
	if env != nil {
		cmd.Env = env
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return out.String(), fmt.Errorf("anchor: %s stopped: %w", path, ctxErr)
	}
	if err != nil {
		return out.String(), fmt.Errorf("anchor: %s %s: %w\n%s", path, strings.Join(args, " "), err, tail(out.String(), 20))
	}
	return out.String(), nil
}

// tail returns the last n lines of s, for error messages.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is sorted in place.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	mid := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[mid]
	}
	return (xs[mid-1] + xs[mid]) / 2
}
