package vstestpmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/internal/tools/toolstest"
)

func TestOptionsAreValidated(t *testing.T) {
	for name, c := range map[string]struct {
		opts Options
		want string
	}{
		"no out":         {Options{}, "Options.Out is nil"},
		"rounds":         {Options{Out: &bytes.Buffer{}, Rounds: MaxRounds + 1}, "Options.Rounds 16"},
		"duration":       {Options{Out: &bytes.Buffer{}, Duration: time.Millisecond}, "Options.Duration 1ms"},
		"size":           {Options{Out: &bytes.Buffer{}, Sizes: []int{64, 9000}}, "frame size 9000"},
		"comparison":     {Options{Out: &bytes.Buffer{}, Comparisons: []string{"afxdp_macswap"}}, `unknown comparison "afxdp_macswap"`},
		"long prefix":    {Options{Out: &bytes.Buffer{}, Prefix: "abcdefghijklm"}, "longer than 12"},
		"prefix charset": {Options{Out: &bytes.Buffer{}, Prefix: "a/b"}, "only letters"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Run(context.Background(), c.opts)
			require.ErrorContains(t, err, c.want)
		})
	}
}

func TestMedian(t *testing.T) {
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	require.True(t, median(nil) != median(nil), "no samples: NaN")
}

var (
	ratioLine   = regexp.MustCompile(`^RATIO [A-Za-z0-9_]+ -?[0-9.]+(e[-+][0-9]+)? goal (>=|<=) [0-9.e+-]+ (PASS|FAIL)$`)
	summaryLine = regexp.MustCompile(`^BENCH-SUMMARY pass=([0-9]+) fail=([0-9]+)$`)
)

// TestRunQuick runs every comparison once, briefly, with 64-byte frames,
// and checks the report's shape (not the verdicts: speed is for the full
// run, `peregrine bench vs-testpmd`).
func TestRunQuick(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to build namespaces and open AF_XDP/AF_PACKET ports (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK); run `sudo go test`")
	}
	toolstest.Require(t, "dpdk-testpmd")
	if testing.Short() {
		t.Skip("runs dpdk-testpmd five times (~15 s); skipped with -short")
	}
	// A bound for a hung run, not a budget: with a CPU hog on each core the
	// run took 80 s and, measuring starved rounds again, over 2 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	pass, fail, err := Run(ctx, Options{Out: &out, Rounds: 1, Duration: 200 * time.Millisecond, Sizes: []int{64}, KeepDisturbed: true})
	t.Log("\n" + out.String())
	require.NoError(t, err)

	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	var ratios []string
	for _, l := range lines {
		if strings.HasPrefix(l, "RATIO ") {
			require.Regexp(t, ratioLine, l)
			ratios = append(ratios, strings.Fields(l)[1])
		}
	}
	require.Equal(t, []string{
		"afxdp_rxonly_64B_vs_testpmd", "afxdp_txonly_64B_vs_testpmd", "afxdp_io_64B_vs_testpmd",
		"afpacket_rxonly_64B_vs_testpmd", "afpacket_io_64B_vs_testpmd", "fwd_loop_heap_allocs_per_pkt",
	}, ratios)
	// --report's figures: each row's peregrine and testpmd Mpps.
	require.Contains(t, out.String(), "SERIES afxdp_io_vs_testpmd peregrine 64 ")
	require.Contains(t, out.String(), "SERIES afxdp_io_vs_testpmd testpmd 64 ")
	require.Equal(t, 2*(len(ratios)-1), strings.Count(out.String(), "SERIES "))
	last := lines[len(lines)-1]
	require.Regexp(t, summaryLine, last, "the summary is the last line")
	require.Equal(t, len(ratios), pass+fail)
	require.Contains(t, last, fmt.Sprintf("pass=%d fail=%d", pass, fail))
}

// TestStealMeterFindsPinnedThreads: a thread pinned to the device under
// test's CPU is found, and the share of the window it waited for the CPU
// is a fraction.
func TestStealMeterFindsPinnedThreads(t *testing.T) {
	if runtime.NumCPU() <= dutCPU {
		t.Skipf("needs CPU %d", dutCPU)
	}
	pinned := make(chan struct{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var set unix.CPUSet
		set.Set(dutCPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			close(pinned)
			return
		}
		close(pinned)
		<-stop
	}()
	<-pinned
	m := startSteal(os.Getpid())
	var dutThreads int
	for _, th := range m.threads {
		if th.cpu == dutCPU {
			dutThreads++
		}
	}
	require.Positive(t, dutThreads, "the pinned thread is found")
	_, dut := m.stop()
	require.GreaterOrEqual(t, dut, 0.0)
	require.LessOrEqual(t, dut, 1.0)
	close(stop)
	<-done

	require.False(t, result{genStolen: 0.01, dutStolen: maxStolen}.disturbed())
	require.True(t, result{dutStolen: maxStolen + 0.01}.disturbed())
	require.True(t, result{genStolen: 0.5}.disturbed())
}

// TestWaitMovedWaitsForAnEvent: a window in which nothing moved is judged
// by whether the loop moves later, within a bound — and such a round is
// disturbed, not measured.
func TestWaitMovedWaitsForAnEvent(t *testing.T) {
	var n atomic.Uint64
	go func() {
		time.Sleep(20 * time.Millisecond) // the loop gets its CPU back later
		n.Add(1)
	}()
	require.NoError(t, waitMoved(context.Background(), n.Load, 0, time.Minute))
	require.ErrorIs(t, waitMoved(context.Background(), n.Load, 1, 10*time.Millisecond), context.DeadlineExceeded)
	require.True(t, result{starved: true}.disturbed())
	require.False(t, result{}.disturbed())
}
