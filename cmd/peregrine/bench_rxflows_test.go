package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	breport "github.com/peregrine-net/peregrine/bench/report"
)

// TestBenchRxFlows: `peregrine bench rxflows` with small counts prints the
// per-flow cost ratio and the allocation ratio, then BENCH-SUMMARY last.
func TestBenchRxFlows(t *testing.T) {
	out, code := runCLI(t, "bench", "rxflows", "--frames", "8192", "--rounds", "1")
	require.Equal(t, 0, code, out)
	names := []string{}
	for _, r := range breport.Parse(strings.NewReader(out)) {
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"gen_rx_per_flow_cost_vs_plain", "gen_rx_per_flow_allocs_per_frame"}, names, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "BENCH-SUMMARY "), out)
}
