package integrity

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/app"
	"github.com/peregrine-net/peregrine/fabric"
)

// TestRunPrintsEveryRatio: the scenario runs (a short one) and prints its
// four ratios and the summary; figures are the bench's, not asserted here.
func TestRunPrintsEveryRatio(t *testing.T) {
	var out bytes.Buffer
	_, _, err := Run(context.Background(), Options{Out: &out, Duration: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Log(out.String())
	for _, name := range []string{"retransmits_per_loss", "spurious_resends_per_loss", "goodput_vs_before", "inorder_2pct_loss_ops_abandoned", "BENCH-SUMMARY"} {
		require.Contains(t, out.String(), name)
	}
	require.Equal(t, 4, strings.Count(out.String(), "RATIO "))
}

// TestHealthyFabricKeepsItsPaths: on the demo's fabric — every path up,
// a little random loss, reordering and four path delays — no connection
// moves its ordered path or the path of its ACKs, with duplicate reports
// or without (then far more resends are spurious): a move needs a packet
// lost twice on the ordered path, or the peer resending what we had in
// successive rounds of its recovery at least a timeout apart.
func TestHealthyFabricKeepsItsPaths(t *testing.T) {
	prof, err := fabric.ParseProfile(app.DemoProfile)
	require.NoError(t, err)
	for _, nodup := range []bool{false, true} {
		r, err := Simulate(context.Background(), SimOptions{Profile: prof, Seed: 1, Duration: 150 * time.Millisecond, NoDupReports: nodup})
		require.NoError(t, err)
		t.Logf("without duplicate reports %v: %s", nodup, r)
		require.Positive(t, r.Drops)
		require.Positive(t, r.Spurious, "the fabric reorders enough to cause spurious resends")
		require.Zero(t, r.OrderedMoves, "ordered-path moves on a healthy fabric, without duplicate reports %v", nodup)
		require.Zero(t, r.AckMoves, "ACK-path moves on a healthy fabric, without duplicate reports %v", nodup)
	}
}
