package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/stretchr/testify/require"
)

// TestDemoVethRemovesNamespacesOnSignal: demo --veth, stopped by SIGTERM
// (a service manager, kill) or SIGINT (Ctrl-C), removes the namespaces it
// created. The binary runs as a child process so the signal is real.
func TestDemoVethRemovesNamespacesOnSignal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("demo --veth creates network namespaces: needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	if testing.Short() {
		t.Skip("builds the binary and runs demo --veth; skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool to build the binary with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "peregrine")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			for _, workload := range []string{"transport", "forward"} {
				cmd := exec.Command(bin, "demo", "--veth", "--driver", "afpacket", "--workload", workload, "--duration", "10m", "--quiet")
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				prefix := fmt.Sprintf("pgdemo-%d-", cmd.Process.Pid%100000)
				t.Cleanup(func() { removeNamespaces(prefix) })

				// The header line is printed once the namespaces exist and
				// the loops are about to run.
				lines := bufio.NewScanner(stdout)
				started := false
				for lines.Scan() {
					if strings.HasPrefix(lines.Text(), "peregrine demo:") {
						started = true
						break
					}
				}
				if !started {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("%s demo never started: %s", workload, stderr.String())
				}
				if got := namespacesWith(prefix); len(got) != 3 {
					t.Fatalf("%s demo running: namespaces %v, want three named %s*", workload, got, prefix)
				}
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				go func() {
					for lines.Scan() { // drain, so the demo never blocks on a full pipe
					}
				}()
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				select {
				case <-exited:
				case <-time.After(2 * time.Minute):
					cmd.Process.Kill()
					<-exited
					t.Fatalf("%s demo did not exit within 2 minutes of %v", workload, sig)
				}
				if got := namespacesWith(prefix); len(got) != 0 {
					t.Errorf("%s demo stopped by %v left namespaces %v behind", workload, sig, got)
				}
			}
		})
	}
}

// namespacesWith lists the named network namespaces starting with prefix.
func namespacesWith(prefix string) []string {
	entries, _ := os.ReadDir(netns.Dir)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// removeNamespaces cleans up after a failed test, so the next run starts
// from nothing.
func removeNamespaces(prefix string) {
	for _, name := range namespacesWith(prefix) {
		exec.Command("ip", "netns", "del", name).Run()
	}
}

// TestTopoDownTakesTheDemoPrefix: hack/topo.sh down removes what a demo
// killed with SIGKILL leaves (pgdemo-PID-gen …), given the prefix the
// namespaces show.
func TestTopoDownTakesTheDemoPrefix(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creates a network namespace: needs root (CAP_SYS_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("needs ip (Debian package iproute2): %v", err)
	}
	const prefix = "pgdemo-99999"
	removeNamespaces(prefix + "-")
	ns, err := netns.Create(prefix + "-gen")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	for _, p := range []string{prefix, "pgdemo"} {
		if got := namespacesWith(prefix + "-"); len(got) == 0 {
			if ns, err = netns.Create(prefix + "-gen"); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := exec.Command("bash", "../../hack/topo.sh", "down", p).CombinedOutput(); err != nil {
			t.Fatalf("hack/topo.sh down %s: %v\n%s", p, err, out)
		}
		if got := namespacesWith(prefix + "-"); len(got) != 0 {
			t.Fatalf("hack/topo.sh down %s left %v", p, got)
		}
	}
}

// TestSecondSignalRemovesDemoNamespaces: a second signal cuts demo
// --veth's drain short and a third, right after, stops it at once; either
// way — the demo closing by itself or stopping by the signal — its
// namespaces go: stopping early abandons work in flight, never the
// machine's state.
func TestSecondSignalRemovesDemoNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("demo --veth creates network namespaces: needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	}
	// A 3 s round trip and a 5 s retransmit timeout keep operations in
	// flight, so the first signal's drain is still waiting when the second
	// comes.
	c := startChild(t, "demo", "--veth", "--driver", "afpacket", "--profile", "delay=1500ms", "--min-rto", "5s", "--duration", "10m", "--log-level", "info")
	prefix := fmt.Sprintf("pgdemo-%d-", c.cmd.Process.Pid%100000)
	t.Cleanup(func() { removeNamespaces(prefix) })
	c.waitLine(`^\[ *\d+\.\ds\]`)
	require.Len(t, namespacesWith(prefix), 3, "the demo's namespaces while it runs")
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	c.waitLine(`signal: stopping`)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	c.waitLine(`second signal: cutting the drain short`)
	_ = c.cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
	code := c.wait()
	require.NotEqual(t, 0, code, c.output())
	require.Empty(t, namespacesWith(prefix), "a second signal left the demo's namespaces behind:\n%s", c.output())
}
