package wire

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// SetClass keeps every checksum right: on a whole frame, and on headers a
// retransmission engine finishes later with AddPayloadSum.
func TestSetClassKeepsChecksums(t *testing.T) {
	payload := make([]byte, 333)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	for _, a := range []Addrs{
		{SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2")},
		{SrcIP: netip.MustParseAddr("2001:db8::1"), DstIP: netip.MustParseAddr("2001:db8::2")},
	} {
		h := &Header{Version: Version, DestCID: 9, Type: TypePushUnsolicitedData, Flags: FlagIOIInOrder, Phase: PhaseHead, SSN: 4}
		tmpl, err := NewFrameTemplate(&a)
		require.NoError(t, err)
		b := make([]byte, 2048)
		n, err := tmpl.Encode(b, h, payload)
		require.NoError(t, err)
		require.True(t, SetClass(b[:n], 0xc123, 10))
		f, err := DecodeFrame(b[:n])
		require.NoError(t, err, "whole frame %v", a.SrcIP)
		require.EqualValues(t, 0xc123, f.SrcPort)
		require.EqualValues(t, 10, DSCP(b[:n]))

		hl, fl, err := tmpl.EncodeHeaders(b, h, len(payload))
		require.NoError(t, err)
		require.True(t, SetClass(b[:hl], 0xd00d, 46))
		sum := CopyChecksum(b[hl:hl+len(payload)], payload, 0)
		clear(b[hl+len(payload) : fl])
		tmpl.AddPayloadSum(b[:fl], sum)
		f, err = DecodeFrame(b[:fl])
		require.NoError(t, err, "headers finished later %v", a.SrcIP)
		require.EqualValues(t, 0xd00d, f.SrcPort)
		require.EqualValues(t, 46, DSCP(b[:fl]))
	}
	require.False(t, SetClass([]byte{1, 2, 3}, 1, 1))
}
