package rxflows

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/bench/report"
)

// TestRun: the scenario runs briefly (its figures are for a quiet
// machine), every frame the generator sent reaches each receiver as a
// stamped frame of a tracked flow (measure checks that), and it prints the
// per-flow cost ratio with a measured value and the allocation ratio, which
// holds exactly: per-flow accounting allocates nothing per frame.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	res, err := Run(context.Background(), Options{Out: &out, Frames: 1 << 15, Rounds: 1, Flows: 1000})
	require.NoError(t, err)
	ratios := report.Parse(strings.NewReader(out.String()))
	require.Len(t, ratios, 2, out.String())
	require.Equal(t, "gen_rx_per_flow_cost_vs_plain", ratios[0].Name)
	require.Equal(t, "gen_rx_per_flow_allocs_per_frame", ratios[1].Name)
	require.True(t, ratios[1].Pass(), out.String())
	require.Greater(t, res.Plain, 0.0)
	require.Greater(t, res.PerFlow, 0.0)
	require.Contains(t, out.String(), "FIGURE gen_rx_per_flow_ns_per_frame ")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "BENCH-SUMMARY "), out.String())
}

// TestMeasureCountsEveryFrame: each loop receives at least the frames asked
// for, and the sink's counters agree with what the loop received.
func TestMeasureCountsEveryFrame(t *testing.T) {
	for _, mode := range []string{"plain", "per-flow", "per-flow-histograms"} {
		ns, _, err := measure(mode, 10000, 4096)
		require.NoError(t, err, mode)
		require.Greater(t, ns, 0.0, mode)
	}
}
