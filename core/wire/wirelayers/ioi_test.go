package wirelayers

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// Summary shows a packet's IOI marks: flag and in-order sequence number,
// phase, DSCP; an unmarked packet shows none.
func TestSummaryShowsIOIMarks(t *testing.T) {
	a := wire.Addrs{SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2")}
	build := func(h wire.Header, dscp uint8, port uint16) string {
		h.Version, h.DestCID, h.Type = wire.Version, 5, wire.TypePushUnsolicitedData
		b := make([]byte, 256)
		n, err := wire.EncodeFrame(b, &a, &h, []byte("payload"))
		require.NoError(t, err)
		require.True(t, wire.SetClass(b[:n], port, dscp))
		return Summary(b[:n], 0)
	}
	s := build(wire.Header{Flags: wire.FlagIOIInOrder, Phase: wire.PhaseHead, SSN: 3}, 10, 0)
	require.Contains(t, s, " ioi=in-order seq=3 ioi-phase=head dscp=10")
	s = build(wire.Header{Phase: wire.PhaseMiddle}, 0, 0xc123)
	require.Contains(t, s, ":49443 → ")
	require.Contains(t, s, " ioi=sprayed ioi-phase=middle")
	require.NotContains(t, build(wire.Header{}, 0, 0), "ioi=")
}
