package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAckDupReport: an ACK's duplicate report (window and PSN) survives
// the round trip beside the OOW flags; the reserved value reads as no
// report, and a window beyond data is refused on encode.
func TestAckDupReport(t *testing.T) {
	for _, dup := range []Window{WindowNone, WindowRequest, WindowData} {
		for _, typ := range []Type{TypeAck, TypeExtendedAck} {
			h := Header{Version: Version, DestCID: 7, Type: typ, PSN: 0xfffffffe, Ack: AckBody{OOW: OOWData, Dup: dup, OOWCount: 3, RxTime: 9}}
			b := make([]byte, 128)
			n, err := h.Encode(b)
			require.NoError(t, err)
			var g Header
			_, err = g.Decode(b[:n])
			require.NoError(t, err)
			require.Equal(t, dup, g.Ack.Dup)
			require.Equal(t, OOWData, g.Ack.OOW)
			require.Equal(t, h.PSN, g.PSN)
			b[BaseHeaderLen] |= 3 << ackDupShift
			_, err = g.Decode(b[:n])
			require.NoError(t, err)
			require.Equal(t, WindowNone, g.Ack.Dup, "reserved: no report")
			require.Equal(t, OOWData, g.Ack.OOW)
		}
	}
	h := Header{Version: Version, DestCID: 7, Type: TypeAck, Ack: AckBody{Dup: 3}}
	_, err := h.Encode(make([]byte, 128))
	require.ErrorIs(t, err, ErrField)
}
