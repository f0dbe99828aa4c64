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

	"github.com/peregrine-net/peregrine/pmd/netns/netnstest"
)

// TestRunVethTinyTrials runs the whole harness as root with tiny trials:
// the topology, the traffic loop, peregrine fwd and the Linux bridge as
// DUTs, the search (twice at 64 B for fwd), latency and frame loss, the
// ratio lines and the report, after measuring the generator's ceiling
// through the direct path. The offered rates are far below what either
// DUT forwards, so both must pass MaxRate with no loss — or, on a machine
// so loaded that the generator cannot keep even 20 kfps, the search's own
// lowered ceiling, said so (generator-limited): never a failure of the DUT.
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
		requireAtMax(t, s, 20000)
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
	require.Contains(t, text, "64B: the generator's ceiling is ")
	require.Contains(t, text, "RATIO ndr_64b_fwd_vs_kernel_bridge ")
	require.Contains(t, text, "RATIO search_repeatability ")
	lines := strings.Split(strings.TrimSpace(text), "\n")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "BENCH-SUMMARY pass="), text)
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| fwd | 64B | ")
}

// TestRunVethExternalDUT measures a device the harness did not build: the
// test creates gen ↔ fwd ↔ sink and a Linux bridge in fwd itself, and
// names the two outer ends as the ports, as a user names the ports around
// their own DUT. The bridge forwards 20 kfps without loss, so the search
// must end at MaxRate, every trial record must reach OnTrial, and the
// topology the test built must be left alone.
func TestRunVethExternalDUT(t *testing.T) {
	topo, br := netnstest.BenchBridge(t)

	var out bytes.Buffer
	var trials []TrialRecord
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunVeth(ctx, VethOptions{
		Out: &out, MaxRate: 20000, DUTs: []string{DUTExternal},
		TxPort: fmt.Sprintf("afxdp:%s?netns=%s", topo.GenIf, topo.Gen.Name),
		RxPort: fmt.Sprintf("afxdp:%s?netns=%s", topo.SinkIf, topo.Sink.Name),
		Method: Options{
			Search:   SearchOptions{Duration: 20 * time.Millisecond, InitialDuration: 10 * time.Millisecond, Width: 0.05},
			Sizes:    []FrameSize{64},
			Measures: []Measure{Throughput},
		},
		OnTrial: func(dut string, size FrameSize, tr TrialRecord) {
			require.Equal(t, DUTExternal, dut)
			require.Equal(t, FrameSize(64), size)
			trials = append(trials, tr)
		},
	})
	require.NoError(t, err, out.String())
	require.Len(t, rep.Results, 1)
	s := rep.Results[0].Size(64)
	require.NotNil(t, s)
	requireAtMax(t, s, 20000)
	require.Len(t, trials, len(s.Searches[0].Trials))
	require.Contains(t, rep.Parameters["topology"], "external DUT between afxdp:"+topo.GenIf)
	// The user's topology is still there.
	_, err = topo.Fwd.Exec("ip", "link", "show", br)
	require.NoError(t, err)
}

// requireAtMax: every search at s passed maxRate — or, when the generator
// was held back at it (a loaded machine), the lower ceiling it could offer,
// said so: a DUT far faster than maxRate never fails a load.
func requireAtMax(t *testing.T, s *SizeResult, maxRate float64) {
	t.Helper()
	require.Positive(t, s.Ceiling, s.SizeStr)
	for _, x := range s.Searches {
		require.True(t, x.Goals[0].AtMax, "%s: %.0f fps is far below what it forwards", s.SizeStr, maxRate)
		if x.GeneratorLimited {
			require.Equal(t, x.Ceiling, x.NDR())
			require.True(t, s.GeneratorLimited)
		} else {
			require.Equal(t, maxRate, x.NDR())
		}
	}
}

func TestVethOptionsRefuseMixedPorts(t *testing.T) {
	for _, o := range []VethOptions{
		{DUTs: []string{DUTExternal}},
		{DUTs: []string{DUTExternal}, TxPort: "afxdp:a"},
		{DUTs: []string{DUTExternal, DUTFwd}, TxPort: "afxdp:a", RxPort: "afxdp:b"},
		{DUTs: []string{DUTFwd}, TxPort: "afxdp:a", RxPort: "afxdp:b"},
	} {
		o.Out = &bytes.Buffer{}
		require.Error(t, o.validate(), "%+v", o)
	}
}
