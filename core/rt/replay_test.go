package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"

	"github.com/peregrine-net/peregrine/core/wire"
)

// injectB hands frame to endpoint b as if a had sent it, and polls b once.
func (h *harness) injectB(frame []byte) { h.t.Helper(); h.injectInto(h.b, h.pa, frame) }

// reencode rebuilds a transmitted frame's bytes from its decoded form.
func reencode(t testing.TB, f *wire.Frame) []byte {
	t.Helper()
	addrs := wire.Addrs{SrcMAC: f.SrcMAC, DstMAC: f.DstMAC, SrcIP: f.SrcIP, DstIP: f.DstIP, SrcPort: f.SrcPort, DstPort: f.DstPort}
	hd := f.Header
	buf := make([]byte, 2048)
	n, err := wire.EncodeFrame(buf, &addrs, &hd, f.Payload)
	require.NoError(t, err)
	return buf[:n]
}

// captureEarly opens an early connection from a to b that pushes one
// packet, records the ConnOpen and the push as they left a, and runs
// until the connection is closed on both sides and b's linger is over.
func captureEarly(h *harness, seq uint64) (open, push []byte) {
	h.t.Helper()
	h.pa.tap = func(f *wire.Frame) int {
		switch {
		case f.Header.Type == wire.TypeConnOpen && open == nil:
			open = reencode(h.t, f)
		case f.Header.Type == wire.TypePushUnsolicitedData && push == nil:
			push = reencode(h.t, f)
		}
		return 1
	}
	ca, err := h.a.OpenEarly(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(h.t, err)
	h.sendAll(ca, wire.TypePushUnsolicitedData, seq, 1, 100)
	h.run(func() bool { return ca.State() == StateEstablished && h.quiet() }, 10*time.Millisecond)
	require.NoError(h.t, ca.Close())
	h.run(func() bool { return h.a.Conns() == 0 && h.b.Conns() == 0 }, time.Second)
	h.pa.tap = nil
	require.NotNil(h.t, open)
	require.NotNil(h.t, push)
	return open, push
}

// No replayed 0-RTT write: a delayed copy of an early ConnOpen and its
// push, arriving after the connection closed and its linger passed, is
// refused: the old push does not run again over newer data. A connect
// that does not repeat one (the initiator's next) is still accepted.
func TestEarlyConnectReplayRefused(t *testing.T) {
	h := newHarness(t, nil)
	open, push := captureEarly(h, 1)
	require.Len(t, h.gotB, 1)
	h.idle(time.Second) // long after b's linger
	s0 := h.b.Stats()
	h.injectB(open)
	h.injectB(push)
	h.idle(10 * time.Millisecond)
	require.Len(t, h.gotB, 1, "the replayed push ran again")
	s := h.b.Stats()
	require.Equal(t, s0.ConnAccepted, s.ConnAccepted, "the replayed connect was accepted")
	require.Equal(t, s0.EarlyReplays+1, s.EarlyReplays)
	require.Zero(t, h.b.Conns())

	// The initiator's next connect is new, and goes through.
	captureEarly(h, 2)
	require.Len(t, h.gotB, 2)
	require.Equal(t, uint64(2), h.gotB[1].seq)
}

// FuzzEarlyAccept drives the target's 0-RTT accept path with early
// ConnOpens and early data whose incarnation, connect number, CID and
// PSNs come from the input, interleaved with time passing (past lingers
// and the replay window) and the target dropping its halves. Nothing may
// panic or break an invariant, and no (incarnation, connect number) is
// ever accepted twice.
func FuzzEarlyAccept(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 5, 1, 9, 0, 0, 0, 0, 1, 4, 2, 9, 0, 0, 0, 1, 200, 0, 0, 0, 0, 0, 0, 0, 1, 5, 1, 9, 0, 0, 0})
	f.Add([]byte{0, 2, 70, 3, 1, 1, 0, 0, 0, 2, 3, 3, 1, 1, 0, 0, 3, 0, 0, 3, 1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8*64 {
			return
		}
		h := newHarness(t, func(a, b *Options) { b.ReplayCache = 2 })
		h.check = false // injectB checks b after every frame
		var live []*Conn
		setEvents(h.b, func(ev Event) {
			if ev.Kind == EventEstablished {
				live = append(live, ev.Conn)
			}
		})
		accepted := map[[2]uint32]bool{}
		lastInc := map[uint32]clock.Time{}
		for ; len(data) >= 8; data = data[8:] {
			op := data[:8]
			inc, num := uint32(op[1]%4), uint32(op[2])
			cid := uint32(op[3]%4) + 1
			psn := uint32(op[4])<<24 | uint32(op[5])
			switch op[0] % 4 {
			case 0:
				hd := &wire.Header{Version: wire.Version, Type: wire.TypeConnOpen, PSN: psn, Offset: psn + 7,
					ReqLen: earlyOpenMark, RSN: inc, SSN: num, ReqEBSN: uint32(op[6]), DataEBSN: uint32(op[7]),
					Ext: wire.Ext{Present: wire.ExtSourceCID, SourceCID: cid}}
				before := h.b.Stats().ConnAccepted
				h.injectB(h.frameFromA(hd))
				if h.b.Stats().ConnAccepted > before {
					k := [2]uint32{inc, num}
					if accepted[k] {
						require.Greater(t, h.clk.Now().Sub(lastInc[inc]), DefaultReplayWindow, "connect %v accepted twice within the replay window", k)
					}
					accepted[k] = true
					lastInc[inc] = h.clk.Now()
				}
			case 1:
				h.clk.Advance(time.Duration(op[1]) * 100 * time.Millisecond)
				h.b.Poll(h.clk.Now())
			case 2:
				for _, c := range live {
					c.Abort()
				}
				live = live[:0]
			case 3:
				hd := &wire.Header{Version: wire.Version, Type: wire.TypePushUnsolicitedData, PSN: psn,
					Ext: wire.Ext{Present: wire.ExtSourceCID, SourceCID: cid}}
				h.injectB(h.frameFromA(hd))
			}
		}
		require.Zero(t, h.b.Stats().Internal)
	})
}

// frameFromA encodes hd from a's address to b's.
func (h *harness) frameFromA(hd *wire.Header) []byte {
	h.t.Helper()
	addrs := wire.Addrs{SrcMAC: macOf(h.pa), DstMAC: macOf(h.pb), SrcIP: ipA, DstIP: ipB}
	buf := make([]byte, 256)
	n, err := wire.EncodeFrame(buf, &addrs, hd, nil)
	require.NoError(h.t, err)
	return buf[:n]
}
