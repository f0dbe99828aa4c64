package rfc2544

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunVethTinyTrials runs the whole harness as root with tiny trials:
// the topology, the traffic loop, peregrine fwd and the Linux bridge as
// DUTs, the search (twice at 64 B for fwd), latency and frame loss, the
// ratio lines and the report. The offered rates are far below what either
// DUT forwards, so both must pass MaxRate with no loss: the figures are
// exact, whatever the machine's load.
func TestRunVethTinyTrials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces, veth, a bridge and AF_XDP sockets")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunVeth(ctx, VethOptions{
		Out: &out, MaxRate: 20000, Repeats: 2, DUTs: []string{DUTKernel, DUTFwd},
		Prefix: fmt.Sprintf("pgr%d", os.Getpid()%100000),
		Method: Options{
			Search:       SearchOptions{Duration: 20 * time.Millisecond, InitialDuration: 10 * time.Millisecond, Width: 0.05},
			Sizes:        []FrameSize{64},
			Measures:     []Measure{Throughput, Latency, FrameLoss},
			LatencyLoads: []float64{0.5, 1}, LossLoads: []float64{0.5, 1},
		},
	})
	require.NoError(t, err, out.String())
	require.Len(t, rep.Results, 2)
	for _, res := range rep.Results {
		s := res.Size(64)
		require.NotNil(t, s, res.DUT)
		require.Equal(t, 20000.0, s.NDR, "%s: 20 kfps is far below what it forwards\n%s", res.DUT, out.String())
		require.True(t, s.Searches[0].Goals[0].AtMax)
		for _, p := range s.FrameLoss {
			require.Zero(t, p.Loss, "%s at %.0f fps", res.DUT, p.Rate)
			require.Equal(t, p.Sent, p.Received)
		}
		require.Len(t, s.Latency, 2)
		for _, p := range s.Latency {
			require.Positive(t, p.P50, res.DUT)
			require.LessOrEqual(t, p.Min, p.P50)
			require.LessOrEqual(t, p.P99, p.Max)
		}
	}
	text := out.String()
	require.Contains(t, text, "RATIO ndr_64b_fwd_vs_kernel_bridge 1.000 goal >= 2 FAIL")
	require.Contains(t, text, "RATIO search_repeatability 1.000 goal <= 1.1 PASS")
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "BENCH-SUMMARY pass=1 fail=1"), text)
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| fwd | 64B | 20000")
}
