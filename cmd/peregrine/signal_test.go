package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// signalHelperEnv makes the test binary a child of
// TestThirdSignalStopsAtOnce (TestMain): a command that registers an undo
// hook and then never finishes stopping.
const signalHelperEnv = "PEREGRINE_SIGNAL_HELPER"

// signalHelper is that child: it prints a line at each stage of
// notifyContext's rules — stopping (first signal), drain cut short
// (second) — and then hangs, as a stop that cannot finish would; only
// the third signal ends it, after the hook has written undone to file.
func signalHelper(file string) {
	ctx, stop := notifyContext(context.Background(), os.Stderr)
	defer stop()
	onKill(ctx, func() { _ = os.WriteFile(file, []byte("undone"), 0o644) })
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("stopping")
	fmt.Println("drained:", drainOrHurry(ctx, func() bool { select {} }))
	select {} // a stop that never finishes
}

// TestThirdSignalStopsAtOnce: the signal rules of demo, fwd, gen, fabric,
// transport and run on a command whose drain and stop never finish: the
// first signal starts the stop, the second cuts the drain short, the
// third ends the process by the signal — after the command's undo hooks
// (demo --veth's namespaces) ran.
func TestThirdSignalStopsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary as a child process; skipped with -short")
	}
	file := t.TempDir() + "/undone"
	c := &child{t: t, cmd: exec.Command(os.Args[0], "-test.run=^$"), lines: make(chan string, 64), done: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), signalHelperEnv+"="+file)
	startChildCmd(t, c)
	c.waitLine(`^ready`)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	c.waitLine(`^stopping`)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	c.waitLine(`^drained: false`)
	_, err := os.Stat(file)
	require.True(t, os.IsNotExist(err), "the hook ran before the third signal")
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-c.done:
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "%v\n%s", err, c.output())
		require.Equal(t, syscall.SIGTERM, ee.Sys().(syscall.WaitStatus).Signal(), c.output())
	case <-time.After(time.Minute):
		t.Fatalf("the third signal did not stop the process:\n%s", c.output())
	}
	data, err := os.ReadFile(file)
	require.NoError(t, err, "the undo hook did not run")
	require.Equal(t, "undone", string(data))
	require.True(t, strings.Contains(c.output(), "second signal: cutting the drain short") && strings.Contains(c.output(), "third signal: stopping at once"), c.output())
}
