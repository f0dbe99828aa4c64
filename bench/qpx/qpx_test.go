package qpx_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	benchqpx "github.com/peregrine-net/peregrine/bench/qpx"
)

// TestRunsBriefly runs the scenario with tiny counts: every line is there
// and the allocation goal holds (timing ratios are the lead's to measure).
func TestRunsBriefly(t *testing.T) {
	var out bytes.Buffer
	_, _, err := benchqpx.Run(context.Background(), benchqpx.Options{Out: &out, Lookups: 1 << 12, Passes: 2, Rounds: 1})
	require.NoError(t, err, out.String())
	s := out.String()
	for _, want := range []string{
		"RATIO qpx_lookup_vs_map_64 ", "RATIO qpx_lookup_vs_map_65536 ", "RATIO icrc_vs_crc32_ieee ",
		"RATIO roce_stage_cost_vs_floor ", "MPPS roce_stage_64B ", "MPPS roce_stage_1KiB ",
		"FIGURE retire_reopen_ns_64 ", "RATIO allocs_per_packet 0.000 goal <= 0 PASS", "BENCH-SUMMARY pass=",
		"SERIES qpx_lookup_ns_vs_live_qps map 65536 ", "SERIES roce_stage_ns_vs_frame_size floor 1024 ", // --report's figures
	} {
		require.Contains(t, s, want)
	}
	t.Log(s)
}
