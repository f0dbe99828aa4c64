package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd/netns"
	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// configFiles lists configs/*.yaml.
func configFiles(t *testing.T) []string {
	files, err := filepath.Glob("../../configs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files, "configs/ holds no example")
	return files
}

// needsVeth reports whether a config opens kernel ports (root, namespaces).
func needsVeth(t *testing.T, file string) bool {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	return regexp.MustCompile(`spec: *"(afpacket|afxdp):`).Match(data)
}

// TestEveryConfigChecks: every file in configs/ passes run --check; one
// that reads a capture passes once the capture is beside it (file names
// are relative to the config's directory) and is refused, naming the
// file, while it is missing.
func TestEveryConfigChecks(t *testing.T) {
	for _, f := range configFiles(t) {
		if readsCapture(t, f) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			dir := t.TempDir()
			copied := filepath.Join(dir, filepath.Base(f))
			require.NoError(t, os.WriteFile(copied, data, 0o644))
			out, code := runCLI(t, "run", "--check", "-c", copied)
			require.Equal(t, exitUsage, code, "%s without its capture: %s", f, out)
			require.Contains(t, out, filepath.Join(dir, "roce-in.pcap"))
			require.Contains(t, out, "cannot be read")
			_, code = runCLI(t, "roce", "sample", "-o", filepath.Join(dir, "roce-in.pcap"))
			require.Equal(t, 0, code)
			f = copied
		}
		out, code := runCLI(t, "run", "--check", "-c", f)
		require.Equal(t, 0, code, "%s: %s", f, out)
		require.Contains(t, out, ": ok (")
	}
}

// servesUntilSignal reports whether a config runs a sidecar (a host
// section) with no run.duration: it has no end of its own.
func servesUntilSignal(t *testing.T, file string) bool {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	return regexp.MustCompile(`(?m)^host:`).Match(data) && !regexp.MustCompile(`(?m)^\s+duration:`).Match(data)
}

// TestInMemoryConfigsRun: every config that needs no privileges runs to
// its end and verifies. Each runs as written (its run.duration, or until
// its finite stages finish), so a slow machine is given the time the file
// gives.
func TestInMemoryConfigsRun(t *testing.T) {
	ran := 0
	for _, f := range configFiles(t) {
		if needsVeth(t, f) || readsCapture(t, f) {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			args := []string{"run", "-c", f, "--quiet"}
			if servesUntilSignal(t, f) {
				// A sidecar serves until a signal (TestRunSidecarConfig
				// drives one with a client): here it serves a second.
				args = append(args, "--duration", "1s")
			}
			out, code := runCLI(t, args...)
			require.Equal(t, 0, code, out)
			require.Contains(t, out, "verification passed")
			require.NotContains(t, out, "<nil>", "a check prints a reason, not a Go nil")
			require.Regexp(t, `pool: \d+ frames, 0 in use after stop`, out)
		})
		ran++
	}
	require.GreaterOrEqual(t, ran, 2, "configs/ should hold in-memory examples (demo, gen-sink)")
}

// TestRunRefusesBadInput: each bad input is a clear error and exit 2
// before anything starts, or exit 1 naming what failed to open.
func TestRunRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	badDriver := write("driver.yaml", "lcores: [{name: a}]\nports: [{name: p, spec: \"nic:eth0\"}]\npipelines: [{lcore: a, stages: [{kind: sink, port: p}]}]\n")
	out, code := runCLI(t, "run", "-c", badDriver)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `ports[0].spec: "nic:eth0": unknown port driver "nic": use one of afpacket, afxdp, mem, null, pcap, pcap-out`)

	twice := write("twice.yaml", "lcores: [{name: a}]\nports: [{name: p, spec: \"afpacket:eth9\"}, {name: q, spec: \"afpacket:eth9?block_count=64\"}]\npipelines: [{lcore: a, stages: [{kind: sink, port: p}]}]\n")
	out, code = runCLI(t, "run", "-c", twice)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "opens the same port as ports[0]")

	// The same through flags: refused before anything opens.
	out, code = runCLI(t, "fwd", "--port", "mem:twice/0", "--port", "mem:twice/0?size=64")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "--port mem:twice/0?size=64 opens the same port as --port mem:twice/0")

	out, code = runCLI(t, "run")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "-c FILE is required")

	out, code = runCLI(t, "run", "-c", filepath.Join(dir, "missing.yaml"))
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "no such file")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	out, code = runCLI(t, "run", "-c", "../../configs/gen-sink.yaml", "--metrics", ln.Addr().String())
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "--metrics")
	require.Contains(t, out, "address already in use")

	out, code = runCLI(t, "run", "-c", "../../configs/gen-sink.yaml", "--metrics", "198.18.0.1:9100")
	require.Equal(t, 2, code, out) // a usage error: nothing was opened
	require.Contains(t, out, "not a loopback address")

	out, code = runCLI(t, "run", "-c", "../../configs/gen-sink.yaml", "--log-format", "xml")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `--log-format "xml": use text or json`)
}

// TestMain removes the binary peregrineBinary built, if any.
func TestMain(m *testing.M) {
	if file := os.Getenv(signalHelperEnv); file != "" {
		signalHelper(file) // a child of TestThirdSignalStopsAtOnce; never returns
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binDir is where peregrineBinary put the binary ("" before it ran).
var binDir string

// peregrineBinary builds the binary once for the tests that run it as a
// child process (a real signal needs a real process).
var peregrineBinary = sync.OnceValues(func() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go tool to build the binary with: %w", err)
	}
	dir, err := os.MkdirTemp("", "peregrine-bin")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "peregrine")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// child is the binary running as a child process, its output read line by
// line.
type child struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	all   strings.Builder
	mu    sync.Mutex
	done  chan error
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs it as a child process; skipped with -short")
	}
	bin, err := peregrineBinary()
	if err != nil {
		t.Skip(err)
	}
	c := &child{t: t, cmd: exec.Command(bin, args...), lines: make(chan string, 1024), done: make(chan error, 1)}
	startChildCmd(t, c)
	return c
}

// startChildCmd starts c.cmd, its standard error joined to its output,
// and reads that line by line.
func startChildCmd(t *testing.T, c *child) {
	t.Helper()
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.cmd.Stderr = c.cmd.Stdout
	require.NoError(t, c.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.all.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
		close(c.lines)
		c.done <- c.cmd.Wait()
	}()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
		}
	})
}

// waitLine waits for a line matching re and returns it.
func (c *child) waitLine(re string) string {
	c.t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("%v exited before printing a line matching %q:\n%s", c.cmd.Args, re, c.output())
			}
			if rx.MatchString(l) {
				return l
			}
		case <-timeout:
			c.t.Fatalf("%v printed no line matching %q within 2 minutes:\n%s", c.cmd.Args, re, c.output())
		}
	}
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all.String()
}

// wait waits for the exit and returns the status.
func (c *child) wait() int {
	c.t.Helper()
	go func() {
		for range c.lines { // drain, so the child never blocks on a full pipe
		}
	}()
	select {
	case err := <-c.done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		require.NoError(c.t, err)
		return 0
	case <-time.After(2 * time.Minute):
		c.cmd.Process.Kill()
		c.t.Fatalf("%v did not exit within 2 minutes:\n%s", c.cmd.Args, c.output())
		return -1
	}
}

// TestRunDrainsOnSIGTERM: the demo config runs until a signal; SIGTERM
// (and SIGINT) stops posting, drains the outstanding operations, stops,
// finds the pool back to zero and exits 0.
func TestRunDrainsOnSIGTERM(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startChild(t, "run", "-c", "../../configs/demo.yaml", "--duration", "0", "--log-level", "info")
			c.waitLine(`^\[ *\d+\.\ds\] initiator .* ops/s`)
			require.NoError(t, c.cmd.Process.Signal(sig))
			code := c.wait()
			out := c.output()
			require.Equal(t, 0, code, out)
			require.Contains(t, out, "stopping (a signal): draining in-flight work")
			require.Contains(t, out, "0 in use after stop")
			require.Contains(t, out, "every operation completed exactly once")
			require.Contains(t, out, "verification passed")
		})
	}
}

// TestRunSecondSignalStopsAtOnce: a second signal cuts the drain short;
// the run still stops and closes, reporting what it lost if anything.
func TestRunSecondSignalStopsAtOnce(t *testing.T) {
	c := startChild(t, "run", "-c", "../../configs/demo.yaml", "--duration", "0", "--quiet")
	c.waitLine(`^running`)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	c.waitLine(`^stopping`)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	start := time.Now()
	c.wait()
	require.Less(t, time.Since(start), 30*time.Second, c.output())
	require.Contains(t, c.output(), "in use after stop")
}

// TestMetricsScrape: --metrics serves Prometheus text with the ports,
// pool, loops, fabric drops by reason and transport counters.
func TestMetricsScrape(t *testing.T) {
	c := startChild(t, "run", "-c", "../../configs/demo.yaml", "--duration", "0", "--quiet", "--metrics", "127.0.0.1:0")
	line := c.waitLine(`^metrics on http://`)
	url := strings.TrimPrefix(line, "metrics on ")
	c.waitLine(`^running`)
	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, `peregrine_transport_ops_completed_total{endpoint="initiator"}`) &&
			!strings.Contains(body, `peregrine_transport_ops_completed_total{endpoint="initiator"} 0`+"\n")
	}, time.Minute, 100*time.Millisecond, "no completed operations in /metrics:\n%s", body)
	for _, want := range []string{
		`peregrine_port_rx_packets_total{port="mem:ini/0?size=4096",queue="0"}`,
		`peregrine_port_tx_bytes_total{port="mem:tgt/1?size=4096",queue="0"}`,
		`peregrine_port_drops_total{port="mem:ini/0?size=4096",reason="rx_no_buffer"}`,
		`peregrine_pool_frames_in_use `,
		`peregrine_lcore_busy_ratio{lcore="a"}`,
		`peregrine_fabric_drops_total{direction="a_to_b",fabric="fabric",reason="loss_random"}`,
		`peregrine_transport_retransmits_total{endpoint="target"}`,
		`peregrine_transport_drops_total{endpoint="initiator",reason="duplicate"}`,
		`peregrine_transport_goodput_bytes_total{endpoint="initiator"}`,
		`peregrine_transport_srtt_seconds{endpoint="initiator"}`,
		`peregrine_transport_cwnd_packets{endpoint="initiator"}`,
		`peregrine_transport_srtt_seconds{endpoint="target"}`, // every endpoint's, not only the initiator's
		`peregrine_transport_cwnd_packets{endpoint="target"}`,
	} {
		require.Contains(t, body, want)
	}
	require.Eventually(t, func() bool { // the target's connections, as they connected
		return regexp.MustCompile(`peregrine_transport_connections\{endpoint="target"\} [1-9]`).MatchString(scrape(t, url))
	}, time.Minute, 100*time.Millisecond, "the target's connections never showed in /metrics")
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, c.wait(), c.output())
}

// TestVethConfigsRun runs the veth examples as a person would, each in its
// own process across three namespaces the test creates (198.18.0.0/15):
// the target, a forwarder or the fabric in the middle, and the initiator;
// then SIGTERM stops the target and the middle, which must exit 0.
func TestVethConfigsRun(t *testing.T) {
	topo := netnstest.ThreeNS(t, netns.VethOptions{GRO: true})
	dir := t.TempDir()
	rename := strings.NewReplacer(
		"pg-gen", topo.Gen.Name, "pg-fwd", topo.Fwd.Name, "pg-sink", topo.Sink.Name,
		"pg-g0", topo.GenIf, "pg-f0", topo.FwdGenIf, "pg-f1", topo.FwdSinkIf, "pg-s0", topo.SinkIf)
	cfg := func(name string) string {
		data, err := os.ReadFile("../../configs/" + name)
		require.NoError(t, err)
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(rename.Replace(string(data))), 0o644))
		return p
	}
	for _, middle := range []string{"forwarder.yaml", "fabric.yaml"} {
		t.Run(middle, func(t *testing.T) {
			target := startChild(t, "run", "-c", cfg("transport-target.yaml"))
			target.waitLine(`^running`)
			mid := startChild(t, "run", "-c", cfg(middle), "--quiet")
			mid.waitLine(`^running`)
			ini := startChild(t, "run", "-c", cfg("transport-initiator.yaml"), "--duration", "2s")
			require.Equal(t, 0, ini.wait(), ini.output())
			require.Contains(t, ini.output(), "verification passed")
			for _, c := range []*child{mid, target} {
				require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
				require.Equal(t, 0, c.wait(), c.output())
				require.Contains(t, c.output(), "0 in use after stop")
			}
		})
	}
}

// TestSubcommandsStopOnSIGTERMAndServeMetrics: demo, fwd, gen, fabric and
// transport, each a child process with --metrics, serve /metrics with
// their ports, pool and loops (and fabric and transport counters where
// they have them), and on SIGTERM stop in order and exit 0.
func TestSubcommandsStopOnSIGTERMAndServeMetrics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		running string // a line printed once the loops run
		metrics []string
		after   string // in the output after the stop
	}{
		{"demo", []string{"demo", "--duration", "10m"}, `^\[ *\d+\.\ds\]`,
			[]string{`peregrine_transport_ops_completed_total{endpoint="initiator"}`, `peregrine_fabric_drops_total{direction="b_to_a",fabric="fabric",reason="loss_random"}`, `peregrine_lcore_busy_ratio{lcore="lcore-a"}`,
				`peregrine_transport_srtt_seconds{endpoint="initiator"}`, `peregrine_transport_cwnd_packets{endpoint="target"}`},
			"verification passed"},
		{"fwd", []string{"fwd", "--port", "null:", "--port", "null:", "--lcores", "0"}, `^\[ *\d+\.\ds\]`,
			[]string{`peregrine_port_rx_packets_total{port="null:",queue="0"}`, `peregrine_pool_frames_in_use `}, "summary after"},
		{"gen", []string{"gen", "--port", "null:", "--rate", "1kpps"}, `^\[ *\d+\.\ds\]`,
			[]string{`peregrine_port_tx_packets_total{port="null:",queue="0"}`}, "generated"},
		{"fabric", []string{"fabric", "--port-a", "null:", "--port-b", "null:"}, `^\[ *\d+\.\ds\]`,
			[]string{`peregrine_fabric_received_total{direction="a_to_b",fabric="fabric"}`}, "summary after"},
		{"transport", []string{"transport", "target", "--port", "null:", "--ip", "198.18.0.2", "--duration", "0"}, `^\[ *\d+\.\ds\]`,
			[]string{`peregrine_transport_drops_total{endpoint="target",reason="not_transport"}`}, "pool 0 in use after stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startChild(t, append(tc.args, "--metrics", "127.0.0.1:0")...)
			url := strings.TrimPrefix(c.waitLine(`^metrics on http://`), "metrics on ")
			c.waitLine(tc.running)
			resp, err := http.Get(url)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			for _, m := range tc.metrics {
				require.Contains(t, string(body), m)
			}
			require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, c.wait(), c.output())
			require.Contains(t, c.output(), tc.after)
		})
	}
}

// TestRunJSONLines: --json prints nothing but JSON lines: one "interval"
// object per stats period and a last "summary" one.
func TestRunJSONLines(t *testing.T) {
	out, code := runCLI(t, "run", "-c", "../../configs/gen-sink.yaml", "--json")
	require.Equal(t, 0, code, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	for i, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "line %d is not JSON: %s", i+1, l)
		if i < len(lines)-1 {
			require.Equal(t, "interval", rec["type"], l)
			require.Contains(t, rec, "ports")
			continue
		}
		require.Equal(t, "summary", rec["type"], l)
		require.Equal(t, true, rec["ok"], l)
		require.Equal(t, float64(0), rec["pool_in_use"], l)
	}
}

// TestDemoJSONLines: demo --json prints only JSON lines, per second and a
// summary carrying every check, for both workloads.
func TestDemoJSONLines(t *testing.T) {
	for _, workload := range []string{"transport", "forward"} {
		out, code := runCLI(t, "demo", "--workload", workload, "--duration", "1500ms", "--json")
		require.Equal(t, 0, code, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.GreaterOrEqual(t, len(lines), 2, out)
		for i, l := range lines {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &rec), "line %d is not JSON: %s", i+1, l)
			want := "interval"
			if i == len(lines)-1 {
				want = "summary"
				require.Equal(t, true, rec["ok"], l)
				require.NotEmpty(t, rec["checks"], l)
			}
			require.Equal(t, want, rec["type"], l)
		}
	}
}

// TestToolsJSONLines: fwd, gen and fabric --json print only JSON lines,
// the last a summary.
func TestToolsJSONLines(t *testing.T) {
	for _, args := range [][]string{
		{"fwd", "--port", "null:", "--port", "null:", "--duration", "1500ms", "--json"},
		{"gen", "--port", "null:", "--rate", "10kpps", "--duration", "1500ms", "--json"},
		{"gen", "--rx", "--port", "null:", "--duration", "1500ms", "--json"},
		{"fabric", "--port-a", "null:", "--port-b", "null:", "--duration", "1500ms", "--json"},
	} {
		out, code := runCLI(t, args...)
		require.Equal(t, 0, code, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.GreaterOrEqual(t, len(lines), 2, "%v: %s", args, out)
		for i, l := range lines {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &rec), "%v line %d is not JSON: %s", args, i+1, l)
			want := "interval"
			if i == len(lines)-1 {
				want = "summary"
			}
			require.Equal(t, want, rec["type"], "%v: %s", args, l)
		}
	}
}

// TestSecondSignalCutsSubcommandDrainShort: with a 3s round trip and a
// 5s retransmit timeout, demo's drain would wait its full --drain for the
// operations in flight; a second SIGTERM cuts it short, as run's does:
// the demo still stops its loops, closes its ports and reports the pool
// and what it abandoned, failing the drain check and exiting 1.
func TestSecondSignalCutsSubcommandDrainShort(t *testing.T) {
	c := startChild(t, "demo", "--profile", "delay=1500ms", "--min-rto", "5s", "--duration", "10m", "--drain", "1m", "--log-level", "info")
	c.waitLine(`^\[ *\d+\.\ds\]`) // operations are in flight: posted, not one completed
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	c.waitLine(`signal: stopping`)
	start := time.Now()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	code := c.wait()
	require.Equal(t, 1, code, c.output())
	require.Less(t, time.Since(start), 30*time.Second, "the drain was not cut short:\n%s", c.output())
	out := c.output()
	require.Contains(t, out, "second signal: cutting the drain short")
	require.Regexp(t, `pool: \d+ frames, \d+ in use after stop`, out)
	require.Regexp(t, `\[FAIL\] every outstanding operation completed after the load stopped, never 1m0s without one completing \(drain [^;]*; [1-9]\d* still outstanding\)`, out)
	require.Contains(t, out, "verification FAILED")
}
