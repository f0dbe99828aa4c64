package anchor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/internal/tools/toolstest"
)

func readSample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(data)
}

// The sample is a real dpdk-test ring_perf_autotest run on this machine
// (DPDK 22.11.11, 2 vCPUs, -l 0,1 --no-huge --no-pci -m 512).
func TestParseRingPerfReadsLegacyBulk32Lines(t *testing.T) {
	figures, pair, err := parseRingPerf(readSample(t, "ring_perf_autotest.txt"))
	require.NoError(t, err)
	// "### Testing using two physical cores ###", first (legacy) section,
	// not the 10.62/19.51 of the "elem APIs: element size 16B" repeat.
	require.Equal(t, 7.76, figures.SPSCBulk32TwoCores)
	require.Equal(t, 12.16, figures.MPMCBulk32TwoCores)
	// "### Testing bulk enq/deq ###" prints cycles per bulk of 32.
	require.InDelta(t, 61.30/32, figures.SPSCBulk32OneCore, 1e-9)
	require.InDelta(t, 67.64/32, figures.MPMCBulk32OneCore, 1e-9)
	require.Equal(t, "two physical cores", pair)
}

func TestParseRingPerfFallsBackToHyperthreadPair(t *testing.T) {
	sample := strings.ReplaceAll(readSample(t, "ring_perf_autotest.txt"),
		"### Testing using two physical cores ###", "### Testing using two hyperthreads ###")
	figures, pair, err := parseRingPerf(sample)
	require.NoError(t, err)
	require.Equal(t, "two hyperthreads", pair)
	require.Equal(t, 7.76, figures.SPSCBulk32TwoCores)
}

func TestParseRingPerfRejectsIncompleteOutput(t *testing.T) {
	sample := readSample(t, "ring_perf_autotest.txt")
	for name, broken := range map[string]string{
		"failed run":         strings.ReplaceAll(sample, "Test OK", "Test Failed"),
		"one lcore only":     strings.ReplaceAll(sample, "### Testing using two physical cores ###", "### Testing using all worker nodes ###"),
		"garbled figure":     strings.Replace(sample, "SP/SC: bulk (size: 32): 7.76", "SP/SC: bulk (size: 32): seven", 1),
		"no single-core run": strings.ReplaceAll(sample, "### Testing bulk enq/deq ###", "### Testing something else ###"),
		"empty":              "",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := parseRingPerf(broken)
			require.ErrorIs(t, err, ErrUnexpectedOutput)
		})
	}
}

// The sample is a real bench/dpdk/mempool_bench run (-t 0.5).
func TestParseMempoolReadsCachedBulk32Cases(t *testing.T) {
	figures, err := parseMempool(readSample(t, "mempool_bench.txt"))
	require.NoError(t, err)
	require.Equal(t, 0.444, figures.CachedBulk32Keep32NsPerObj)
	require.Equal(t, 0.422, figures.CachedBulk32Keep128NsPerObj)
	require.Len(t, figures.Cases, 6)

	bulk1, ok := figures.Case(1, 32, false)
	require.True(t, ok)
	require.Equal(t, MempoolCase{Bulk: 1, Keep: 32, NsPerObj: 3.525, CyclesPerObj: 9.164, RatePerSec: 283711828}, bulk1)
	constant, ok := figures.Case(32, 128, true)
	require.True(t, ok)
	require.Equal(t, 0.279, constant.NsPerObj)
	_, ok = figures.Case(4, 32, false)
	require.False(t, ok)
}

func TestParseMempoolRejectsIncompleteOutput(t *testing.T) {
	sample := readSample(t, "mempool_bench.txt")
	for name, broken := range map[string]string{
		"no done line":  strings.ReplaceAll(sample, "MEMPOOL done", ""),
		"missing case":  strings.ReplaceAll(sample, "bulk=32 keep=128 constant_n=0", "bulk=16 keep=128 constant_n=0"),
		"garbled value": strings.Replace(sample, "ns_per_obj=0.444", "ns_per_obj=fast", 1),
		"missing field": strings.Replace(sample, "ns_per_obj=0.444 ", "", 1),
		"zero time":     strings.Replace(sample, "ns_per_obj=0.444", "ns_per_obj=0", 1),
		"bare word":     strings.Replace(sample, "MEMPOOL cached cache=512", "MEMPOOL cached cache", 1),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseMempool(broken)
			require.ErrorIs(t, err, ErrUnexpectedOutput)
		})
	}
}

// The sample is a real interactive dpdk-testpmd run: start, 5 s, stop, quit.
func TestParseAccumulatedReadsAllPortsTotals(t *testing.T) {
	res, err := parseAccumulated(readSample(t, "testpmd_io_null.txt"))
	require.NoError(t, err)
	require.Equal(t, uint64(292843392), res.TxPackets) // port 0 + port 1
	require.Equal(t, uint64(292843392), res.RxPackets)
	require.Zero(t, res.RxDropped)
	require.Zero(t, res.TxDropped)
}

func TestParseAccumulatedReadsDrops(t *testing.T) {
	sample := strings.Replace(readSample(t, "testpmd_io_null.txt"),
		"RX-packets: 292843392      RX-dropped: 0 ", "RX-packets: 292843392      RX-dropped: 17", 1)
	res, err := parseAccumulated(sample)
	require.NoError(t, err)
	require.Equal(t, uint64(17), res.RxDropped)
}

func TestParseAccumulatedRejectsMissingBlock(t *testing.T) {
	sample := readSample(t, "testpmd_io_null.txt")
	_, err := parseAccumulated(strings.ReplaceAll(sample, "Accumulated", "Partial"))
	require.ErrorIs(t, err, ErrUnexpectedOutput)
	_, err = parseAccumulated(strings.ReplaceAll(sample, "TX-packets: 292843392", "TX-packets: many"))
	require.ErrorIs(t, err, ErrUnexpectedOutput)
}

func TestPromptWatcherCountsPromptsSplitAcrossWrites(t *testing.T) {
	w := newPromptWatcher()
	for _, chunk := range []string{
		"Checking link statuses...\nDone\ntestpmd", "> start\r\ntes", "tpmd> ",
		"testpmd> testpmd> ", "stop\r\n",
	} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	require.Equal(t, 4, w.count())
	require.Contains(t, w.String(), "Done\ntestpmd> start")
}

func TestPromptWatcherWaitEndsOnExit(t *testing.T) {
	w := newPromptWatcher()
	exited := make(chan struct{})
	close(exited)
	err := w.waitPrompts(context.Background(), exited, 1, time.Minute)
	require.ErrorContains(t, err, "exited early")

	_, _ = w.Write([]byte("testpmd> "))
	require.NoError(t, w.waitPrompts(context.Background(), exited, 1, time.Minute))
}

func TestMedian(t *testing.T) {
	require.Equal(t, 0.0, median(nil))
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
}

func TestTestpmdRejectsBadDuration(t *testing.T) {
	for _, dur := range []time.Duration{0, -time.Second, MaxTestpmdDuration + 1} {
		_, err := TestpmdNullIOFwd(context.Background(), dur)
		require.ErrorContains(t, err, "testpmd duration")
	}
}

func TestTestpmdRejectsBadOptions(t *testing.T) {
	ctx := context.Background()
	_, err := Testpmd(ctx, TestpmdOptions{Duration: time.Second})
	require.ErrorContains(t, err, "Vdevs is empty")
	_, err = Testpmd(ctx, TestpmdOptions{Vdevs: []string{"net_null0"}, Duration: time.Second, TxPktLen: -1})
	require.ErrorContains(t, err, "TxPktLen -1")
	_, err = Testpmd(ctx, TestpmdOptions{Vdevs: []string{"net_null0"}})
	require.ErrorContains(t, err, "testpmd duration 0s")
}

func TestMissingToolsReportNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx := context.Background()

	_, err := RingPerf(ctx)
	require.ErrorIs(t, err, ErrNotInstalled)
	require.ErrorContains(t, err, "hack/install-deps.sh")

	_, err = MempoolPerf(ctx)
	require.ErrorIs(t, err, ErrNotInstalled)

	_, err = TestpmdNullIOFwd(ctx, time.Second)
	require.ErrorIs(t, err, ErrNotInstalled)
}

func TestFindBuildScriptFindsTheCheckout(t *testing.T) {
	script, err := findBuildScript()
	require.NoError(t, err)
	want, err := filepath.Abs(filepath.Join("..", "dpdk", "build.sh"))
	require.NoError(t, err)
	require.Equal(t, want, script)
}

// requireTools skips (not root) or fails (root) when a DPDK tool is
// missing, naming its Debian package. EAL runs unprivileged here thanks to
// --no-huge/--no-shconf, so root is not required.
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	toolstest.Require(t, tools...)
}

// The live tests run each tool once, shortened so the package stays within
// its test-time budget; `peregrine bench foundation` runs the full versions.
// They check the plumbing and that figures are plausible, not speed.

func TestRingPerfRunsDpdkTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dpdk-test ring_perf_autotest (~5 s); skipped with -short")
	}
	requireTools(t, "dpdk-test")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	figures, err := ringPerf(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, figures.Runs)
	require.Len(t, figures.Samples, 1)
	require.Equal(t, figures.SPSCBulk32TwoCores, figures.Samples[0].SPSCBulk32TwoCores)
	require.Contains(t, []string{"two physical cores", "two hyperthreads"}, figures.Pair)
	for name, v := range map[string]float64{
		"SP/SC two cores": figures.SPSCBulk32TwoCores, "MP/MC two cores": figures.MPMCBulk32TwoCores,
		"SP/SC one core": figures.SPSCBulk32OneCore, "MP/MC one core": figures.MPMCBulk32OneCore,
	} {
		require.Greater(t, v, 0.0, name)
		require.Less(t, v, 10_000.0, name)
	}
	require.Contains(t, figures.Raw, "=== run 1 ===")
	t.Logf("ring bulk-32 cycles/elem: SP/SC two cores %.2f, MP/MC two cores %.2f, SP/SC one core %.2f, MP/MC one core %.2f",
		figures.SPSCBulk32TwoCores, figures.MPMCBulk32TwoCores, figures.SPSCBulk32OneCore, figures.MPMCBulk32OneCore)
}

func TestMempoolPerfBuildsAndRunsHarness(t *testing.T) {
	requireTools(t, "gcc", "pkg-config")
	if exec.Command("pkg-config", "--exists", "libdpdk").Run() != nil {
		t.Skip("libdpdk not installed (run hack/install-deps.sh as root)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	figures, err := mempoolPerf(ctx, 0.05)
	require.NoError(t, err)
	require.Greater(t, figures.CachedBulk32Keep32NsPerObj, 0.0)
	require.Greater(t, figures.CachedBulk32Keep128NsPerObj, 0.0)
	require.Len(t, figures.Cases, 6)
	t.Logf("mempool cached bulk 32 ns/obj: keep 32 %.3f, keep 128 %.3f",
		figures.CachedBulk32Keep32NsPerObj, figures.CachedBulk32Keep128NsPerObj)
}

func TestTestpmdNullIOFwdRunsTestpmd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dpdk-testpmd (~4 s); skipped with -short")
	}
	requireTools(t, "dpdk-testpmd")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mpps, err := TestpmdNullIOFwd(ctx, time.Second)
	require.NoError(t, err)
	require.Greater(t, mpps, 0.1)
	require.Less(t, mpps, 10_000.0)
	t.Logf("testpmd io fwd over 2x net_null, 1 forwarding core: %.1f Mpps", mpps)
}

// TestTestpmdTxonlyReportsCountsAndCallsHooks runs the general driver in
// txonly mode over one net_null port (its tx frees what it is given).
func TestTestpmdTxonlyReportsCountsAndCallsHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dpdk-testpmd (~2 s); skipped with -short")
	}
	requireTools(t, "dpdk-testpmd")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var hooks []string
	res, err := Testpmd(ctx, TestpmdOptions{
		Vdevs: []string{"net_null0"}, ForwardMode: "txonly", TxPktLen: 128,
		Duration: 500 * time.Millisecond, TotalMbufs: 8192,
		BeforeStart: func() { hooks = append(hooks, "before-start") },
		AfterStop:   func() { hooks = append(hooks, "after-stop") },
	})
	require.NoError(t, err)
	require.Equal(t, []string{"before-start", "after-stop"}, hooks)
	require.Positive(t, res.TxPackets)
	require.Zero(t, res.RxPackets, "txonly receives nothing")
	require.GreaterOrEqual(t, res.Elapsed, 500*time.Millisecond)
	require.Contains(t, res.Output, "txonly packet forwarding")
	require.Contains(t, res.Output, "packet len=128")
	t.Logf("testpmd txonly over net_null: %.1f Mpps", float64(res.TxPackets)/res.Elapsed.Seconds()/1e6)
}

func TestTestpmdInMissingNamespaceFailsAtStartup(t *testing.T) {
	requireTools(t, "dpdk-testpmd", "ip")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Testpmd(ctx, TestpmdOptions{Netns: "pg-no-such-namespace", Vdevs: []string{"net_null0"}, Duration: time.Second})
	require.ErrorContains(t, err, "testpmd startup")
}

func TestTestpmdIsKilledWhenContextEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dpdk-testpmd; skipped with -short")
	}
	requireTools(t, "dpdk-testpmd")
	// testpmd needs ~2.5 s to reach its prompt; the deadline ends it first.
	const deadline = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	began := time.Now()
	_, err := TestpmdNullIOFwd(ctx, time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Returning at all means the child was reaped (the function waits for
	// it); well before killGrace means SIGKILL, not the grace timeout.
	require.Less(t, time.Since(began), deadline+killGrace)
}
