package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBenchScaleSmall runs bench scale once in its small mode (what CI
// runs): every row completes operations on every shard, the ratios are
// printed, no frame was steered in software, and the last line is the
// summary. It judges no speed.
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
	lines := strings.Split(strings.TrimSpace(s), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "BENCH-SUMMARY "), s)
}
