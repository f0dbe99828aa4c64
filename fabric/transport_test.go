package fabric

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestTransportClassifierPinsOnlyInOrderPackets(t *testing.T) {
	addrs := &wire.Addrs{SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2")}
	build := func(flags wire.Flags, port uint16) []byte {
		a := *addrs
		a.DstPort = port
		b := make([]byte, 256)
		n, err := wire.EncodeFrame(b, &a, &wire.Header{Version: wire.Version, DestCID: 7, Type: wire.TypePushUnsolicitedData, Flags: flags}, []byte("x"))
		require.NoError(t, err)
		return b[:n]
	}
	classify := TransportClassifier(0)
	_, inOrder := classify(build(wire.FlagIOIInOrder, wire.DefaultPort))
	require.True(t, inOrder, "IOI in-order packet")
	_, inOrder = classify(build(0, wire.DefaultPort))
	require.False(t, inOrder, "sprayable transport packet")
	_, inOrder = classify(build(0, 9999))
	require.True(t, inOrder, "other UDP traffic stays in order")
	_, inOrder = classify([]byte{1, 2, 3})
	require.True(t, inOrder, "garbage stays in order and does not panic")
	h1, _ := classify(build(0, wire.DefaultPort))
	h2, _ := classify(build(wire.FlagIOIInOrder, wire.DefaultPort))
	require.Equal(t, h1, h2, "one flow, one hash, whatever the flags")
}
