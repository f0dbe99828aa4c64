package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBenchScaleSmall runs bench scale once in its small mode (what CI
// runs): every row completes operations on every shard, the ratios are
// printed, no frame was steered in software, and the last line is the
// summary. As root the AF_XDP veth rows run too (every queue forwards,
// every shard completes operations, the kernel's CPU share is printed, and
// the target's XDP program counts no datagram on another shard's queue);
// otherwise they are printed as SKIP with the reason. It judges no speed.
func TestBenchScaleSmall(t *testing.T) {
	var out bytes.Buffer
	_, _, err := runBenchScale(context.Background(), &out, scaleOptions{duration: 50 * time.Millisecond, window: 8, small: true, seed: 1})
	require.NoError(t, err, out.String())
	s := out.String()
	for _, want := range []string{
		"RATIO transport_2shards_vs_1_ops_mem ",
		"RATIO transport_2shards_vs_1_goodput_mem ",
		"RATIO steered_in_software_fraction 0.000 goal <= 0 PASS",
		"FIGURE scale_mem_push64_2shard_ops_per_s ",
		"shard 1 ",
	} {
		require.Contains(t, s, want)
	}
	veth := []string{
		"RATIO fwd_2queues_vs_1_afxdp_veth ",
		"RATIO transport_2shards_vs_1_afxdp_veth ",
		"RATIO steered_in_software_fraction_afxdp_veth ",
	}
	if os.Geteuid() != 0 {
		for _, want := range veth {
			require.Regexp(t, regexp.QuoteMeta(want)+`NaN goal \S+ \S+ SKIP\n  # needs root`, s)
		}
		t.Log("not root: the AF_XDP veth rows were skipped")
	} else {
		for _, want := range append(veth,
			"RATIO steered_in_software_fraction_afxdp_veth 0.000 goal <= 0 PASS",
			"FIGURE scale_veth_fwd64_2queue_fps ",
			"FIGURE scale_veth_fwd64_2queue_kernel_cpu_share_cpu",
			"kernel_cpu_share_fwd_2queues ",
			"FIGURE scale_veth_push64_2shard_ops_per_s ",
			// ConnOpens of the initiator's shard 1 arrive on queue 1,
			// which their source CID names: none is counted.
			"the target's XDP program saw [0 0] datagrams arrive on another shard's queue",
		) {
			require.Contains(t, s, want)
		}
		require.Regexp(t, `veth_fwd64_2queue: forwarded [1-9]\d* of [1-9]\d* offered .*; queue 0 [1-9]\d* fps, queue 1 [1-9]\d* fps`, s)
		require.Regexp(t, `veth_push64_2shard: [1-9]\d* ops in .*; shard 0 [1-9]\d* ops/s, shard 1 [1-9]\d* ops/s`, s)
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "BENCH-SUMMARY "), s)
}

// TestParseCPUTimes: the kernel's share of a CPU is its system, irq and
// softirq ticks over all of them (user to steal), read from its own line
// only; a CPU without a line is an error.
func TestParseCPUTimes(t *testing.T) {
	stat := "cpu  100 0 100 100 0 0 0 0 0 0\ncpu0 10 1 20 30 4 5 6 7 8 9\ncpu1 1 0 2 3 0 0 4 0 0 0\nintr 1 2\n"
	got, err := parseCPUTimes(stat, []int{1, 0})
	require.NoError(t, err)
	require.Equal(t, []cpuTimes{{kernel: 6, total: 10}, {kernel: 31, total: 83}}, got)
	require.InDelta(t, 0.6, cpuShare{kernel: 6, total: 10}.share(), 1e-9)
	_, err = parseCPUTimes(stat, []int{2})
	require.ErrorContains(t, err, "no line for CPU 2")
}
