package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestTransportInitiatorOutlivesKilledTarget is the end-to-end
// check of the failure semantics: `peregrine transport target` and
// `peregrine transport initiator --op-timeout` run as two processes in
// their own namespaces, joined by a veth pair; once operations flow the
// target is killed (SIGKILL: no close, no NACK, nothing). The initiator
// must end every operation with an error within the op timeout (plus a
// margin for a loaded machine's polling, well below the transport's
// retry budget: an operation's packets still unacknowledged at its
// deadline are given up then, not when the retries run out) — timed out,
// or failed with its connection — then stop once every connection
// failed, say why, and exit 1 (a failed run) with its pool back to zero
// in use, well within the op timeout plus the retry budget. Every wait is
// on an output line or the process's exit, with generous bounds; nothing
// sleeps.
func TestTransportInitiatorOutlivesKilledTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two transport processes over veth; skipped with -short")
	}
	addrA, addrB := netip.MustParsePrefix("198.18.12.1/24"), netip.MustParsePrefix("198.18.12.2/24")
	topo := netnstest.TwoNS(t, netns.VethOptions{AddrA: addrA, AddrB: addrB})
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool to build the binary with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "peregrine")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const opTimeout = 300 * time.Millisecond
	// The bound on ending every operation after the kill: the op timeout,
	// plus the transport's retry budget for packets still unacknowledged
	// (RetryLimit 20 sends of the packet, then of its resync, each backed
	// off up to 100 ms: about 4 s), plus slack for a loaded machine.
	const bound = opTimeout + 15*time.Second
	// The bound on each failed operation, posting to completion: the op
	// timeout plus slack for the poll loop on a loaded machine. Before
	// operations were ended at their deadline, the slowest took the
	// retry budget (1.7 s and more after the kill here).
	const opBound = opTimeout + time.Second
	common := []string{"--sizes", "4KiB,16KiB", "--window", "8", "--idle", "yield", "--frames", "4096",
		"--target-delay", testTargetDelay.String()}

	// The target, until killed.
	target := exec.Command(bin, append([]string{"transport", "target",
		"--port", fmt.Sprintf("afpacket:%s?netns=%s", topo.IfB, topo.B.Name), "--ip", addrB.Addr().String(),
		"--duration", "0", "--quiet"}, common...)...)
	tgt := startLines(t, target)
	ready := tgt.wait(t, 30*time.Second, func(l string) bool { return strings.HasPrefix(l, "READY ") })
	key := regexp.MustCompile(`key=(0x[0-9a-f]+)`).FindStringSubmatch(ready)
	require.NotNil(t, key, "target's READY line: %q", ready)

	// The initiator: its per-second lines show operations flowing.
	initiator := exec.Command(bin, append([]string{"transport", "initiator",
		"--port", fmt.Sprintf("afpacket:%s?netns=%s", topo.IfA, topo.A.Name), "--ip", addrA.Addr().String(),
		"--peer-mac", topo.MACB.String(), "--peer-ip", addrB.Addr().String(), "--region-key", key[1],
		"--conns", "2", "--pull-every", "3", "--duration", "5m", "--op-timeout", opTimeout.String()}, common...)...)
	ini := startLines(t, initiator)
	rate := regexp.MustCompile(`^\[\s*[0-9.]+s\]\s+([0-9.]+) ops/s`)
	ini.wait(t, time.Minute, func(l string) bool {
		m := rate.FindStringSubmatch(l)
		if m == nil {
			return false
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v > 0
	})

	require.NoError(t, target.Process.Kill())
	killed := time.Now()
	_ = target.Wait()
	<-tgt.done

	// Everything the initiator says until it exits.
	var rest []string
	for {
		select {
		case l, ok := <-ini.lines:
			if ok {
				rest = append(rest, l)
				continue
			}
		case <-time.After(bound + 30*time.Second):
			_ = initiator.Process.Kill()
			t.Fatalf("the initiator did not exit within %v of the target's death:\n%s", bound+30*time.Second, strings.Join(rest, "\n"))
		}
		break
	}
	err = initiator.Wait()
	took := time.Since(killed)
	out := strings.Join(rest, "\n")
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "initiator exit: %v\n%s", err, out)
	require.Equal(t, exitFailed, ee.ExitCode(), "the initiator exits 1 (a failed run) when its target died:\n%s", out)
	require.Less(t, took, bound, "the initiator took %v after the kill to end every operation and exit (op timeout %v):\n%s", took, opTimeout, out)
	for _, want := range []string{
		"connection to the target failed:", // the reason, from the connection event
		"[ok  ] every outstanding operation completed within 5s of the load stopping (0 still outstanding)",
		"[ok  ] pool back to zero in use",
		"[FAIL] no operation failed (",
		"verification FAILED",
		"pool 0 in use after stop",
	} {
		require.Contains(t, out, want, "initiator output:\n%s", out)
	}
	// Every failure is a named one: timed out, or the connection failed.
	fails := regexp.MustCompile(`\[FAIL\] no operation failed \((\d+): (.*)\)`).FindStringSubmatch(out)
	require.NotNil(t, fails, out)
	for _, why := range strings.Split(fails[2], "; ") {
		require.True(t, strings.Contains(why, "timed out") || strings.Contains(why, "the connection failed"),
			"an operation failed for a reason other than the target's death: %q\n%s", why, out)
	}
	require.Contains(t, out, "ops=", "the RESULT line:\n%s", out)
	slowest := regexp.MustCompile(`slowest failed operation ended (\S+) after it was posted`).FindStringSubmatch(out)
	require.NotNil(t, slowest, "the initiator names its slowest failed operation:\n%s", out)
	d, err := time.ParseDuration(slowest[1])
	require.NoError(t, err, slowest[0])
	require.LessOrEqual(t, d, opBound, "an operation ended %v after it was posted, op timeout %v:\n%s", d, opTimeout, out)
	t.Logf("every operation ended and the initiator exited %v after the target's SIGKILL (op timeout %v):\n%s", took, opTimeout, out)
}

// lineProc is a child process whose stdout is read line by line.
type lineProc struct {
	lines  chan string
	done   chan struct{}
	stderr *lockedBuffer
}

// lockedBuffer is a strings.Builder the exec package writes from its own
// goroutine while a failing test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLines starts cmd and delivers its stdout lines on lines (closed at
// EOF); stderr is kept for failure messages. The process is killed at the
// end of the test if still running.
func startLines(t *testing.T, cmd *exec.Cmd) *lineProc {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &lineProc{lines: make(chan string, 1024), done: make(chan struct{}), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	go func() {
		defer close(p.done)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return p
}

// wait returns the first line that match accepts, failing t if the
// process ends or limit passes first.
func (p *lineProc) wait(t *testing.T, limit time.Duration, match func(string) bool) string {
	t.Helper()
	deadline := time.After(limit)
	var seen []string
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the process ended before the expected line; stdout:\n%s\nstderr:\n%s", strings.Join(seen, "\n"), p.stderr.String())
			}
			if match(l) {
				return l
			}
			seen = append(seen, l)
		case <-deadline:
			t.Fatalf("no expected line within %v; stdout:\n%s\nstderr:\n%s", limit, strings.Join(seen, "\n"), p.stderr.String())
		}
	}
}
