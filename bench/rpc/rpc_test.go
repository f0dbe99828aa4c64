package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

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
	require.Equal(t, len(ratios), pass+fail)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Equal(t, fmt.Sprintf("BENCH-SUMMARY pass=%d fail=%d", pass, fail), lines[len(lines)-1])
}

// TestOnlyUnknownDoor: a misspelt door is an error before anything runs.
func TestOnlyUnknownDoor(t *testing.T) {
	var out bytes.Buffer
	_, _, err := Run(context.Background(), Options{Out: &out, Only: []string{"rwa"}})
	require.ErrorContains(t, err, `unknown door "rwa"`)
	require.Empty(t, out.String())
}

// BenchmarkRow runs one in-memory row (RPC_ROW, default mem_api_1k_x1;
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
	require.Equal(b, "mem", where, "RPC_ROW: in-memory rows only")
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
		m := &media{where: "mem", cpuA: cpuA, cpuB: cpuB, tcpAddr: "127.0.0.1",
			specA: fmt.Sprintf("mem:rpcb%d-%d/0", os.Getpid(), n), specB: fmt.Sprintf("mem:rpcb%d-%d/1", os.Getpid(), n)}
		d, err := openDoor(o, m, doorName, depth)
		require.NoError(b, err)
		sw0 := threadSwitches()
		res, err := d.rows(context.Background(), bytes, depth, rowLen{count, 0})
		b.ReportMetric(float64(threadSwitches()-sw0)/float64(count), "sleeps/roundtrip")
		require.NoError(b, errors.Join(err, d.close()))
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
