package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

// injectFrom sends one frame, built from addrs, hd and payload as they are
// (the tag hd carries is kept), out of port p as if its endpoint had.
func (h *harness) injectFrom(p *tapPort, addrs *wire.Addrs, hd *wire.Header, payload []byte) {
	h.t.Helper()
	buf := make([]byte, 512)
	n, err := wire.EncodeFrame(buf, addrs, hd, payload)
	require.NoError(h.t, err)
	hs := make([]mbuf.Handle, 1)
	require.Equal(h.t, 1, h.pool.AllocBulk(hs))
	copy(h.pool.Append(hs[0], n), buf[:n])
	require.Equal(h.t, 1, p.Port.TxBurst(0, hs))
}

// An extended ACK whose bitmap (or duplicate report, or hop count) is
// rewritten in flight, its tag kept, fails its seal: the sender drops it
// unacknowledged and counts it, never takes the lost packet for received,
// and recovers the real loss. Before, the bitmaps were outside the tag: a
// forged bit for a packet the receiver never got retired it at the
// sender — an OK for bytes never placed.
func TestSealCoversAckBitmaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(hd *wire.Header, hole uint32)
	}{
		{"request bitmap bit", func(hd *wire.Header, hole uint32) { hd.Ack.ReqBitmap.Set(hole) }},
		{"hop echo", func(hd *wire.Header, _ uint32) { hd.HopEcho += 3 }},
		{"buffer level", func(hd *wire.Header, _ uint32) { hd.Ack.RxBufLevel = 200 }},
		{"ack requested", func(hd *wire.Header, _ uint32) { hd.Flags ^= wire.FlagAckRequested }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			ca, _ := h.connect()
			// Packets 1 and 3 of six are lost once: b's extended ACK then
			// shows packet 3's hole behind packet 1's eBSN.
			var psns []uint32
			lost := map[uint32]bool{}
			nth := 0
			h.pa.tap = func(f *wire.Frame) int {
				if f.Header.Type != wire.TypePushUnsolicitedData || f.Header.Flags&wire.FlagRetransmission != 0 {
					return 1
				}
				nth++
				if nth == 2 || nth == 4 {
					lost[f.Header.PSN] = true
					return 0
				}
				return 1
			}
			var held *wire.Frame
			h.pb.tap = func(f *wire.Frame) int {
				if held == nil && f.Header.Type == wire.TypeExtendedAck {
					cp := *f
					held = &cp
					return 0 // the forged copy goes in its place
				}
				return 1
			}
			acked := map[uint32]bool{}
			setAcked(h.a, func(_ *Conn, _ wire.Window, psn uint32, _ uint64) { acked[psn] = true })
			psns = h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 6, 64)
			h.runFor(func() bool { return held != nil }, 50*time.Millisecond)
			require.NotNil(t, held, "b sent an extended ACK")
			require.Len(t, lost, 2)
			hd := held.Header
			require.NotZero(t, hd.Ext.Present&wire.ExtSeal)
			hole := psns[3] - hd.ReqEBSN
			require.False(t, hd.Ack.ReqBitmap.Has(hole), "b has not packet 3")
			tc.edit(&hd, hole)
			s0 := h.a.Stats()
			h.injectFrom(h.pb, &held.Addrs, &hd, nil)
			h.poll()
			h.poll()
			s := h.a.Stats()
			require.False(t, acked[psns[3]], "a lost packet is not acknowledged by a forged bit")
			require.Equal(t, s0.RxBadSeal+1, s.RxBadSeal, "the rewritten ACK fails its seal")
			require.Equal(t, s0.RxExtendedAck, s.RxExtendedAck, "the ACK was not processed")

			h.run(func() bool { return len(h.gotB) == 6 && h.quiet() }, time.Second)
			seqs := map[uint64]bool{}
			for _, d := range h.gotB {
				seqs[d.seq] = true
			}
			require.Len(t, seqs, 6, "the real losses were recovered")
			for _, p := range psns {
				require.True(t, acked[p])
			}
		})
	}
}
