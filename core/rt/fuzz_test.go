package rt

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

// FuzzEndpointRX feeds arbitrary frames to an established endpoint. With
// wrap set, the input is the UDP payload (transport header and payload)
// and the harness wraps it in valid Ethernet/IPv4/UDP headers with a
// correct checksum, optionally forcing the destination CID to the live
// connection's, so the fuzzer gets past the checksum to the transport.
// The endpoint must never panic and its invariants must hold after every
// frame; the connection keeps working afterwards.
//
// The connection is unsealed: on a sealed one nearly every input stops at
// its tag (seal.go), and the paths behind it are what a forger holding
// the key reaches.
func FuzzEndpointRX(f *testing.F) {
	h := newHarness(f, func(a, b *Options) { a.NoSeal = true })
	ca, cb := h.connect()
	h.sendAll(ca, wire.TypePushRequest, 0, 3, 16)
	h.poll()

	// Seeds: every packet type, addressed to a's connection.
	for _, typ := range []wire.Type{wire.TypeAck, wire.TypeExtendedAck, wire.TypeNack, wire.TypeResync,
		wire.TypeConnOpen, wire.TypeConnAccept, wire.TypeConnClose, wire.TypePullRequest, wire.TypePullData, wire.TypePushGrant} {
		hd := wire.Header{Version: wire.Version, DestCID: ca.LocalCID(), Type: typ, PSN: ca.Window(wire.WindowData).RxBSN}
		switch typ {
		case wire.TypeNack:
			hd.Nack = wire.NackBody{Code: wire.NackReceiverNotReady, Window: wire.WindowRequest, PSN: ca.Window(wire.WindowRequest).TxBSN}
		case wire.TypeResync:
			hd.Resync = wire.ResyncBody{Code: wire.ResyncTimeout, OrigType: wire.TypePullData}
		case wire.TypeConnOpen, wire.TypeConnAccept:
			hd.Ext = wire.Ext{Present: wire.ExtSourceCID, SourceCID: ca.PeerCID()}
		case wire.TypeExtendedAck:
			hd.Ack.ReqBitmap.Set(1)
		}
		hd.ReqEBSN, hd.DataEBSN = ca.Window(wire.WindowRequest).TxBSN, ca.Window(wire.WindowData).TxBSN
		buf := make([]byte, 256)
		n, err := hd.Encode(buf)
		require.NoError(f, err)
		f.Add(buf[:n], true, true)
		f.Add(buf[:n], true, false)
	}
	f.Add([]byte{0x10, 0, 0, 1}, false, false)
	f.Add(make([]byte, 60), false, true)

	inject := func(frame []byte) {
		hs := make([]mbuf.Handle, 1)
		if h.pool.AllocBulk(hs) != 1 {
			return
		}
		copy(h.pool.Append(hs[0], min(len(frame), 2000)), frame)
		if h.pb.Port.TxBurst(0, hs) != 1 {
			h.pool.Free(hs)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, wrap, fixCID bool) {
		h.t = t // assertions fail this input, not the F
		if ca.State() != StateEstablished && ca.State() != StateClosing {
			// Forged ConnOpens may hold slots half-open (a SYN flood in
			// miniature): let them time out, then connect again.
			// b's half of a connection that a forged packet killed at a
			// never times out while idle (keepalive is off by default).
			cb.Abort()
			h.idle(time.Second)
			h.evB = nil
			ca, cb = h.connect()
		}
		frame := in
		if wrap {
			p := append([]byte(nil), in...)
			if fixCID && len(p) >= 4 {
				binary.BigEndian.PutUint32(p, 1<<28|ca.LocalCID())
			}
			frame = udpFrame(macOf(h.pb), macOf(h.pa), [4]byte(ipB.AsSlice()), [4]byte(ipA.AsSlice()), wire.DefaultPort, p)
		}
		inject(frame)
		for range 3 {
			h.a.Poll(h.clk.Now())
			require.NoError(t, h.a.CheckInvariants())
			h.b.Poll(h.clk.Now())
			h.clk.Advance(10 * time.Microsecond)
		}
		require.Zero(t, h.a.Stats().Internal)
	})
}

// udpFrame builds Ethernet/IPv4/UDP around payload with valid checksums.
func udpFrame(src, dst [6]byte, sip, dip [4]byte, port uint16, payload []byte) []byte {
	a := wire.Addrs{SrcMAC: src, DstMAC: dst, SrcIP: netip.AddrFrom4(sip), DstIP: netip.AddrFrom4(dip), SrcPort: port, DstPort: port}
	const off = wire.EthHeaderLen + wire.IPv4HeaderLen + wire.UDPHeaderLen
	payload = payload[:min(len(payload), 0xffff-off+wire.EthHeaderLen)] // the most one IPv4 packet holds
	b := make([]byte, max(off+len(payload), wire.MinFrameLen))
	copy(b[off:], payload)
	n, err := wire.EncodeUDP(b, &a, len(payload))
	if err != nil {
		panic(err) // cannot happen: the addresses are valid and the payload fits
	}
	return b[:n]
}
