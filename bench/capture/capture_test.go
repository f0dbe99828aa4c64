package capture

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/bench/report"
)

// TestRun: the scenario runs (briefly: its figures are the lead's to
// measure on a quiet machine) and prints its three ratios; the structural
// one — a port without capture= is the driver's own — holds exactly.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	_, _, err := Run(context.Background(), Options{Out: &out, Packets: 4096, Rounds: 1, Dir: t.TempDir()})
	require.NoError(t, err)
	ratios := report.Parse(strings.NewReader(out.String()))
	require.Len(t, ratios, 3, out.String())
	require.Contains(t, out.String(), "# capture off vs plain port ")
	require.Equal(t, "capture_off_wrapped_ports", ratios[0].Name)
	require.True(t, ratios[0].Pass(), out.String())
	require.Contains(t, out.String(), "FIGURE capture_on_ns_per_packet ")
}
