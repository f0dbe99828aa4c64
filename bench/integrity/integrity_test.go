package integrity

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
