package rt

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

// nackFrame builds a NACK from b to a's connection ca, as a forger on the
// peer's address would.
func (h *harness) nackFrame(ca *Conn, code wire.NackCode, w wire.Window, psn, echo uint32, ulp uint8) []byte {
	h.t.Helper()
	st := ca.Window(wire.WindowRequest)
	dt := ca.Window(wire.WindowData)
	hd := wire.Header{Version: wire.Version, DestCID: ca.LocalCID(), Type: wire.TypeNack, ReqEBSN: st.TxBSN, DataEBSN: dt.TxBSN,
		TxTime: 99, TxEcho: echo, Nack: wire.NackBody{Code: code, Window: w, PSN: psn, ULPCode: ulp, RNRTimeoutMicros: 1000}}
	h.sealForA(&hd, 0)
	b := make([]byte, 256)
	n, err := wire.EncodeFrame(b, &wire.Addrs{SrcMAC: macOf(h.pb), DstMAC: macOf(h.pa), SrcIP: ipB, DstIP: ipA}, &hd, nil)
	require.NoError(h.t, err)
	return b[:n]
}

// inject puts frame f on the wire from b to a.
func (h *harness) injectToA(f []byte) {
	hs := make([]mbuf.Handle, 1)
	require.Equal(h.t, 1, h.pool.AllocBulk(hs))
	copy(h.pool.Append(hs[0], len(f)), f)
	require.Equal(h.t, 1, h.pb.Port.TxBurst(0, hs))
}

// checkForgedNacks sends 8 packets, then injects NACKs that name their
// PSNs with echoes that none of their transmissions had: none of them is
// acted on (no refusal reported, no packet given up, no hold-off, no
// refund), every packet is delivered once and acknowledged, and each NACK
// that named an outstanding packet is counted as forged.
func checkForgedNacks(t *testing.T, nacks []byte) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	var psns []uint32
	for i := range 8 {
		psn, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, Cookie: uint64(i + 1)}, payload(uint64(i), 64))
		require.NoError(t, err)
		psns = append(psns, psn)
	}
	sentAt := stamp(h.clk.Now())
	h.a.Poll(h.clk.Now()) // the packets leave; the NACKs reach a before b has them
	codes := []wire.NackCode{wire.NackResourceExhausted, wire.NackReceiverNotReady, wire.NackOutOfWindow, wire.NackULPError, wire.NackUnexpected}
	named := 0
	for i := 0; i+5 < len(nacks); i += 6 {
		echo := binary.BigEndian.Uint32(nacks[i+2:])
		if echo == sentAt {
			continue // the genuine echo: not a forgery
		}
		code := codes[int(nacks[i])%len(codes)]
		psn := psns[int(nacks[i+1])%len(psns)]
		h.injectToA(h.nackFrame(ca, code, wire.WindowRequest, psn, echo, nacks[i+1]))
		named++
	}
	h.run(func() bool { return h.a.Outstanding() == 0 }, time.Second)
	require.Empty(t, eventsOf(h.evA, EventNack), "no forged NACK reached the ULP")
	require.Empty(t, eventsOf(h.evA, EventAbandoned))
	require.Len(t, h.gotB, 8, "every packet delivered once")
	st := h.a.Stats()
	require.Zero(t, st.Refunds+st.TxRetransmit+st.ResyncSent, "no refund, no hold-off resend, no resync")
	require.EqualValues(t, named, st.NackForged+st.NackStale+st.AckForged, "every forged NACK counted")
	require.Zero(t, st.Internal)
}

// TestForgedNacksIgnored: NACKs of every code that names a PSN, for live
// PSNs, with an echo no transmission had.
func TestForgedNacksIgnored(t *testing.T) {
	checkForgedNacks(t, []byte{0, 0, 0, 0, 0, 7, 1, 1, 0, 0, 0, 9, 2, 2, 1, 2, 3, 4, 3, 3, 9, 9, 9, 9, 4, 4, 0, 0, 0, 1})
}

// FuzzNackMatching feeds forged NACKs (code, PSN, echo) for live packets.
func FuzzNackMatching(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0, 0, 7})
	f.Add([]byte{2, 5, 0xff, 0xff, 0xff, 0xff, 1, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, nacks []byte) {
		if len(nacks) > 6*64 {
			return
		}
		checkForgedNacks(t, nacks)
	})
}
