package smallops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/lcore"
)

// TestRunPrintsEveryRow runs the whole scenario once with a short window
// and checks that every row's figures, the ratios and the forwarding
// baseline are printed, summary last. Without root the AF_XDP rows are
// reported skipped.
func TestRunPrintsEveryRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every row for 100ms; -short skips it")
	}
	var out bytes.Buffer
	pass, fail, err := Run(context.Background(), Options{
		Out: &out, Duration: 100 * time.Millisecond, Window: 64, Prefix: fmt.Sprintf("pgsot%d", os.Getpid()),
	})
	require.NoError(t, err, out.String())
	text := out.String()
	t.Log(text)
	for _, name := range Rows() {
		if strings.HasPrefix(name, "afxdp") && os.Geteuid() != 0 {
			require.Contains(t, text, "  # "+name+" skipped: needs root")
			continue
		}
		require.Contains(t, text, "FIGURE smallops_"+name+"_ops_per_s ")
		require.Contains(t, text, "FIGURE smallops_"+name+"_ops_per_cpu_s ")
		require.Regexp(t, "  # "+name+`: \d+ ops in .* \(0 failed\), retransmissions \d+ timeout \+ \d+ early, fabric losses \d+, spurious timeouts \d+ \(\d+ asked\), loop stalls > 1ms: initiator \d+ target \d+`, text)
	}
	for _, name := range []string{"smallops_push64_per_core", "smallops_retransmits_without_loss"} {
		require.Contains(t, text, "RATIO "+name+" ")
	}
	require.Contains(t, text, "FIGURE smallops_push64_vs_mem_forwarding ")
	require.Contains(t, text, "FIGURE smallops_mem_forwarding_mpps ")
	require.Contains(t, text, "FIGURE smallops_crosscore_pingpong_ns ")
	require.Contains(t, text, "FIGURE smallops_mem_push64_one_loop_ops_per_s ")
	require.Contains(t, text, "FIGURE smallops_mem_push64_one_loop_ops_per_cpu_s ")
	require.Equal(t, 2, pass+fail)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.Equal(t, fmt.Sprintf("BENCH-SUMMARY pass=%d fail=%d", pass, fail), lines[len(lines)-1])
}

// BenchmarkRow runs one row for its measured window (SMALLOPS_ROW, default
// mem_push64): the scenario under `go test -cpuprofile`, the endpoints'
// poll loops included. SMALLOPS_ONELOOP=1 runs both endpoints of an
// in-memory row on one loop, so that the profile is what an operation
// costs, whatever the machine's load. SMALLOPS_SIZE=N moves N-byte pushes
// instead (8 in flight), for a profile of the bulk path; the endpoints'
// loops carry the pprof label side=initiator or side=target on the rows
// with two pipelines (afxdp). SMALLOPS_MINCWND=N raises the initiator's
// congestion floor (Options.MinCwnd).
func BenchmarkRow(b *testing.B) {
	name := os.Getenv("SMALLOPS_ROW")
	if name == "" {
		name = "mem_push64"
	}
	i := slices.IndexFunc(rows, func(r row) bool { return r.name == name })
	require.GreaterOrEqual(b, i, 0, "no row %q", name)
	cpuA, cpuB, err := twoCPUs()
	require.NoError(b, err)
	b.ReportAllocs()
	for range b.N {
		o := Options{Duration: 2 * time.Second, Window: DefaultWindow, Seed: 1, Prefix: fmt.Sprintf("pgsob%d", os.Getpid()), oneLoop: os.Getenv("SMALLOPS_ONELOOP") != "", label: true}
		if v := os.Getenv("SMALLOPS_SIZE"); v != "" {
			o.size, err = strconv.Atoi(v)
			require.NoError(b, err)
			o.Window = 8
		}
		if v := os.Getenv("SMALLOPS_IDLE"); v != "" {
			o.idle, err = lcore.ParseIdleMode(v)
			require.NoError(b, err)
		}
		if v := os.Getenv("SMALLOPS_MINCWND"); v != "" {
			o.MinCwnd, err = strconv.ParseFloat(v, 64)
			require.NoError(b, err)
		}
		if v := os.Getenv("SMALLOPS_WINDOW"); v != "" {
			o.Window, err = strconv.Atoi(v)
			require.NoError(b, err)
		}
		res, err := runRow(context.Background(), o, rows[i], cpuA, cpuB)
		require.NoError(b, err)
		b.ReportMetric(res.rate(), "ops/s")
		b.ReportMetric(res.perCPU(), "ops/cpu-s")
		b.ReportMetric(float64(res.retx+res.earlyR), "retx")
		b.ReportMetric(float64(res.bytes), "bytes-moved")
		b.ReportMetric(float64(res.retx), "timeouts")
		b.ReportMetric(float64(res.spurious), "spurious")
	}
}
