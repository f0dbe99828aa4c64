package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGenPerFlowHistogramsFlag: --per-flow-histograms belongs to a
// receiver with --per-flow; anywhere else it is a usage error naming it,
// and --help says what it is for.
func TestGenPerFlowHistogramsFlag(t *testing.T) {
	for _, args := range [][]string{
		{"gen", "--port", "mem:a/0", "--per-flow-histograms"},
		{"gen", "--rx", "--port", "mem:a/0", "--per-flow-histograms"},
	} {
		out, code := runCLI(t, args...)
		require.Equal(t, exitUsage, code, out)
		require.Contains(t, out, "--per-flow-histograms does nothing", out)
	}
	out, code := runCLI(t, "gen", "--help")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "--per-flow-histograms")
	require.Contains(t, out, "per-flow percentiles")
}
