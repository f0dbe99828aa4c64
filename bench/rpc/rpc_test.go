package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine"
	"github.com/peregrine-net/peregrine/bench/internal/benchtopo"
)

// TestRunSmall runs the whole scenario once with a small count and a 256 KiB
// file, and checks every row's figures, the ratios and the summary (last).
// Without root the veth rows, and the ratios over veth, are reported
// skipped.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every row for a few hundred round trips; -short skips it")
	}
	var out bytes.Buffer
	pass, fail, err := Run(context.Background(), Options{
		Out: &out, Count: 300, FileSize: 256 << 10, Prefix: fmt.Sprintf("pgrpct%d", os.Getpid()),
	})
	text := out.String()
	t.Log(text)
	require.NoError(t, err)
	require.NotContains(t, text, "file transfer failed")
	root := os.Geteuid() == 0
	for _, name := range Rows() {
		if strings.HasPrefix(name, "veth") && !root {
			require.NotContains(t, text, "FIGURE rpc_"+name+"_")
			continue
		}
		require.Contains(t, text, "FIGURE rpc_"+name+"_ops_per_s ")
		require.Regexp(t, regexp.QuoteMeta("  # "+name+": 300 round trips in ")+`.*p50/p99/p99.9 [0-9.]+/[0-9.]+/[0-9.]+ µs`, text)
	}
	ratios := []string{"api_vs_raw_cost_1k", "sidecar_vs_inprocess_cost_1k", "sidecar_allocs_per_op"}
	if root {
		ratios = append(ratios, "rpc_1k_vs_kernel_tcp_ops", "rpc_1k_p99_vs_kernel_tcp", "file_transfer_262144b_vs_kernel_tcp")
		require.Contains(t, text, "FIGURE rpc_veth_sidecar_file_transfer_gbps ")
		require.Contains(t, text, "FIGURE rpc_veth_tcp_file_transfer_gbps ")
		// The transfer's ceiling, measured in the same run, and its share
		// in the ratio's detail.
		ceil, _ := ceilingFigure(t, text)
		require.Regexp(t, `(?m)^RATIO file_transfer_262144b_vs_kernel_tcp .*\n  # .*sidecar [0-9.]+ Gbit/s \([0-9]+ % of the AF_XDP frame ceiling `+regexp.QuoteMeta(ceil)+` Gbit/s measured in this run\)`, text)
	} else {
		require.Contains(t, text, "veth rows skipped: needs root")
		require.NotContains(t, text, "FIGURE rpc_veth_afxdp_frame_ceiling_gbps")
	}
	for _, name := range ratios {
		require.Regexp(t, "(?m)^RATIO "+name+` [0-9.]+ goal (<=|>=) [0-9.]+ (PASS|FAIL)$`, text)
	}
	require.Contains(t, text, "FIGURE rpc_mem_sidecar_file_transfer_gbps ")
	require.Regexp(t, `(?m)^FIGURE rpc_crosscore_pingpong_ns [0-9]+$`, text)
	require.Equal(t, len(ratios), pass+fail)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Equal(t, fmt.Sprintf("BENCH-SUMMARY pass=%d fail=%d", pass, fail), lines[len(lines)-1])
}

// TestRounds: with Rounds, every row runs once a round (each noted with
// its round) and its FIGURE is printed once, from the rounds' median.
func TestRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the raw rows three times; -short skips it")
	}
	var out bytes.Buffer
	_, _, err := Run(context.Background(), Options{
		Out: &out, Count: 200, Rounds: 3, Only: []string{"raw"}, Prefix: fmt.Sprintf("pgrpcr%d", os.Getpid()),
	})
	text := out.String()
	t.Log(text)
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		require.Regexp(t, fmt.Sprintf(`  # round %d of 3: a cache line's round trip between CPUs [0-9]+ and [0-9]+ [0-9]+ ns\n`, i), text)
		require.Regexp(t, fmt.Sprintf(`  # round %d of 3 done: a cache line's round trip [0-9]+ ns\n`, i), text)
	}
	require.Equal(t, 1, strings.Count(text, "FIGURE rpc_crosscore_pingpong_ns "))
	row := "mem_raw_1k_x1"
	rounds := regexp.MustCompile(`(?m)^  # `+row+`: 200 round trips in \S+, ([0-9]+) ns each`).FindAllStringSubmatch(text, -1)
	require.Len(t, rounds, 4, "three rounds' notes and the median's") // the median's note follows its FIGURE
	require.Equal(t, 1, strings.Count(text, "FIGURE rpc_"+row+"_ops_per_s "))
	if os.Geteuid() == 0 { // the veth pair's ceiling: a note a round, one figure
		require.Equal(t, 3, strings.Count(text, "  # veth AF_XDP frame ceiling: "))
		require.Equal(t, 1, strings.Count(text, "FIGURE rpc_veth_afxdp_frame_ceiling_gbps "))
	}
	var ns []int
	for _, m := range rounds[:3] {
		v, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		ns = append(ns, v)
	}
	slices.Sort(ns)
	require.Equal(t, strconv.Itoa(ns[1]), rounds[3][1], "the figure is the middle round's")
}

// medianOf takes the middle round's cost, each percentile's median and the
// fewest allocations any round made.
func TestMedianOf(t *testing.T) {
	rs := []result{
		{ops: 100, wall: 900 * time.Microsecond, p50: 5, p99: 30, p999: 90, allocs: 0},
		{ops: 100, wall: 300 * time.Microsecond, p50: 2, p99: 10, p999: 99, allocs: 0.5},
		{ops: 100, wall: 600 * time.Microsecond, p50: 9, p99: 20, p999: 10, allocs: 0.25},
	}
	m := medianOf(rs)
	require.Equal(t, 600*time.Microsecond, m.wall)
	require.Equal(t, result{ops: 100, wall: 600 * time.Microsecond, p50: 5, p99: 20, p999: 90, allocs: 0}, m)
}

// TestMedianRound: a ratio of two rows is the median of the rounds' own
// ratios, with that round's rows, not the ratio of the rows' medians
// (which here would set one door's fast round against the other's slow
// one: 5,000 ÷ 2,800 = 1.79, where no round measured more than 1.3).
func TestMedianRound(t *testing.T) {
	at := func(api, raw time.Duration) map[string]result {
		return map[string]result{"api": {ops: 1, wall: api}, "raw": {ops: 1, wall: raw}}
	}
	rounds := []map[string]result{at(3200, 2800), at(5000, 4000), at(6500, 5000)}
	g, vs := medianRound(rounds, func(g map[string]result) float64 { return g["api"].nsPerOp() / g["raw"].nsPerOp() })
	require.Equal(t, []float64{3200.0 / 2800, 1.25, 1.3}, vs)
	require.Equal(t, rounds[1], g, "the median ratio's round")
	require.Contains(t, roundsNote(vs, nil), "1.143, 1.250, 1.300")
	require.Contains(t, roundsNote(vs, [][2]float64{{90, 88}, {390, 95}, {385, 402}}), "1.143 (cache line 90/88 ns), 1.250 (cache line 390/95 ns), 1.300 (cache line 385/402 ns)")
	require.Empty(t, roundsNote(vs[:1], nil), "one round: nothing to list")
}

// TestOnlyUnknownDoor: a misspelt door is an error before anything runs.
func TestOnlyUnknownDoor(t *testing.T) {
	var out bytes.Buffer
	_, _, err := Run(context.Background(), Options{Out: &out, Only: []string{"rwa"}})
	require.ErrorContains(t, err, `unknown door "rwa"`)
	require.Empty(t, out.String())
}

// BenchmarkRow runs one row (RPC_ROW, default mem_api_1k_x1; veth rows as root;
// RPC_COUNT round trips, default 5000) as the scenario runs it, for `go
// test -cpuprofile`: where a door's round trip goes, by share. RPC_IDLE
// (busy, adaptive, sleep) and RPC_NOPIN=1 change the endpoints' loops.
func BenchmarkRow(b *testing.B) {
	name := os.Getenv("RPC_ROW")
	if name == "" {
		name = "mem_api_1k_x1"
	}
	count := 5000
	if v := os.Getenv("RPC_COUNT"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		count = n
	}
	var where, doorName, size string
	var depth int
	_, err := fmt.Sscanf(strings.ReplaceAll(name, "_", " "), "%s %s %s x%d", &where, &doorName, &size, &depth)
	require.NoError(b, err, "RPC_ROW %q: want WHERE_DOOR_SIZE_xDEPTH", name)
	require.Contains(b, Wheres, where, "RPC_ROW: mem_ or veth_ rows")
	if where == "veth" && os.Geteuid() != 0 {
		b.Skip("veth rows need root (namespaces, veth, AF_XDP sockets)")
	}
	bytes := map[string]int{"64b": 64, "1k": 1024}[size]
	require.NotZero(b, bytes, "RPC_ROW size %q: 64b or 1k", size)
	o := Options{NoPin: os.Getenv("RPC_NOPIN") != ""}
	switch os.Getenv("RPC_IDLE") {
	case "busy":
		o.Idle = peregrine.IdleBusy
	case "sleep":
		o.Idle = peregrine.IdleSleep
	}
	cpuA, cpuB, err := benchtopo.TwoCPUs()
	require.NoError(b, err)
	procs := doorProcs(doorName)
	if v := os.Getenv("RPC_PROCS"); v != "" {
		procs, _ = strconv.Atoi(v)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	b.ReportAllocs()
	for range b.N {
		n := memSeq.Add(1)
		m := &media{where: where, cpuA: cpuA, cpuB: cpuB, tcpAddr: "127.0.0.1",
			specA: fmt.Sprintf("mem:rpcb%d-%d/0", os.Getpid(), n), specB: fmt.Sprintf("mem:rpcb%d-%d/1", os.Getpid(), n)}
		cleanup := func() {}
		if where == "veth" {
			cleanup, err = m.vethPair(fmt.Sprintf("pgrpcb%d", os.Getpid()))
			require.NoError(b, err)
		}
		d, err := openDoor(o, m, doorName, depth)
		require.NoError(b, err)
		sw0 := threadSwitches()
		res, err := d.rows(context.Background(), bytes, depth, rowLen{count, 0})
		b.ReportMetric(float64(threadSwitches()-sw0)/float64(count), "sleeps/roundtrip")
		err = errors.Join(err, d.close())
		cleanup()
		require.NoError(b, err)
		b.ReportMetric(res.nsPerOp(), "ns/roundtrip")
		b.ReportMetric(res.p99, "p99-µs")
		b.ReportMetric(res.allocs, "allocs/roundtrip")
	}
}

// threadSwitches sums the voluntary context switches of the process's
// threads: each is a thread that went to sleep (a futex wait, a sleep), so
// their count per round trip shows the hand-offs that wake threads,
// however loaded the machine.
func threadSwitches() int64 {
	tasks, _ := os.ReadDir("/proc/self/task")
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			}
		}
	}
	return n
}
