package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

// A real packet with one covered field rewritten (its PSN, connection
// and tag kept, as a middlebox or a misdelivered frame leaves them)
// fails its seal: b drops it unacknowledged and counts it, and the real
// packet's resend is delivered in its place. Before, b took the forged
// packet as the PSN's, acknowledged it, and the real one never came.
func TestSealDropsRewrittenPackets(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(hd *wire.Header)
	}{
		{"request number", func(hd *wire.Header) { hd.RSN += 7 }},
		{"index (SSN)", func(hd *wire.Header) { hd.SSN ^= 3 }},
		{"request length", func(hd *wire.Header) { hd.ReqLen += 1024 }},
		{"offset", func(hd *wire.Header) { hd.Offset += 64 }},
		{"type", func(hd *wire.Header) { hd.Type = wire.TypePushSolicitedData }},
		{"tag stripped", func(hd *wire.Header) { hd.Ext.Present &^= wire.ExtSeal }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			ca, _ := h.connect()
			var held *wire.Frame
			h.pa.tap = func(f *wire.Frame) int {
				if held == nil && f.Header.Type == wire.TypePushUnsolicitedData {
					cp := *f
					cp.Payload = append([]byte(nil), f.Payload...)
					held = &cp
					return 0 // the real packet is lost the first time
				}
				return 1
			}
			h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 4, 64)
			h.poll()
			require.NotNil(t, held)
			hd := held.Header
			require.NotZero(t, hd.Ext.Present&wire.ExtSeal, "a sealed connection's packets carry the tag")
			tc.edit(&hd)
			buf := make([]byte, 512)
			n, err := wire.EncodeFrame(buf, &held.Addrs, &hd, held.Payload)
			require.NoError(t, err)
			s0, ackedBefore := h.b.Stats(), ca.Window(wire.WindowRequest).TxBSN
			hs := make([]mbuf.Handle, 1)
			require.Equal(t, 1, h.pool.AllocBulk(hs))
			copy(h.pool.Append(hs[0], n), buf[:n])
			require.Equal(t, 1, h.pa.Port.TxBurst(0, hs))
			h.poll()
			h.poll()
			s := h.b.Stats()
			require.Equal(t, s0.RxBadSeal+1, s.RxBadSeal)
			require.Equal(t, s0.RxDelivered, s.RxDelivered, "nothing delivered for it")
			for _, d := range h.gotB {
				require.NotEqual(t, hd.PSN, d.psn, "the forged packet was not delivered")
			}
			require.Equal(t, ackedBefore, ca.Window(wire.WindowRequest).TxBSN, "nor acknowledged")
			h.run(func() bool { return len(h.gotB) == 4 && h.quiet() }, time.Second)
			for i, d := range h.gotB {
				require.Equal(t, 64, d.length, "packet %d", i)
			}
			seqs := map[uint64]bool{}
			for _, d := range h.gotB {
				seqs[d.seq] = true
			}
			require.Len(t, seqs, 4, "the real packet came in its place")
		})
	}
}

// Sealing is on when both ends seal: with either one's NoSeal, no packet
// carries a tag or a key after the handshake, and traffic flows.
func TestSealNegotiated(t *testing.T) {
	for _, tc := range []struct {
		name         string
		noA, noB     bool
		wantA, wantB bool // packets from a (b) carry the tag
	}{
		{"both", false, false, true, true},
		{"a opts out", true, false, false, false},
		{"b opts out", false, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(a, b *Options) { a.NoSeal, b.NoSeal = tc.noA, tc.noB })
			sealed := map[bool]map[bool]int{true: {}, false: {}}
			tap := func(fromA bool) func(f *wire.Frame) int {
				return func(f *wire.Frame) int {
					if f.Header.Type.Sealed() {
						sealed[fromA][f.Header.Ext.Present&wire.ExtSeal != 0]++
					}
					return 1
				}
			}
			ca, _ := h.connect()
			h.pa.tap, h.pb.tap = tap(true), tap(false)
			h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 8, 64)
			h.run(func() bool { return len(h.gotB) == 8 && h.quiet() }, time.Second)
			require.Zero(t, sealed[true][!tc.wantA], "a's packets")
			require.Zero(t, sealed[false][!tc.wantB], "b's packets")
			require.Positive(t, sealed[true][tc.wantA])
			require.Positive(t, sealed[false][tc.wantB])
			require.Zero(t, h.a.Stats().RxBadSeal+h.b.Stats().RxBadSeal)
		})
	}
}
