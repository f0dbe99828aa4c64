package wire_test

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestRefreshMatchesFreshEncode: a frame built once and refreshed for a
// later transmission is byte for byte the frame built afresh with the new
// per-send fields, over both IP versions, with and without the IPv4 UDP
// checksum, every type, and payloads around the padding limit.
func TestRefreshMatchesFreshEncode(t *testing.T) {
	const seed = 43
	r := newRand(seed)
	for i := range 5000 {
		a := addrs4()
		if i%2 == 1 {
			a = addrs6()
		}
		a.NoUDPChecksum = i%3 == 0
		tmpl, err := wire.NewFrameTemplate(&a)
		require.NoError(t, err)
		typ := allTypes[r.IntN(len(allTypes))]
		payload := randBytes(r, r.IntN(100))
		h := randHeader(r, typ, len(payload))
		h.Flags &^= wire.FlagRetransmission | wire.FlagAckRequested
		h.Retry = 0
		frame := make([]byte, 400)
		n, err := tmpl.Encode(frame, &h, payload)
		require.NoError(t, err)

		f := wire.SendFields{
			Retry:    uint8(r.IntN(20)),
			ReqEBSN:  r.Uint32(),
			DataEBSN: r.Uint32(),
			TxTime:   r.Uint32(),
			TxEcho:   r.Uint32(),
		}
		if r.IntN(2) == 0 {
			f.Flags = wire.FlagRetransmission | wire.FlagAckRequested
		}
		tmpl.Refresh(frame[:n], &f)

		h.Flags |= f.Flags
		h.Retry = min(f.Retry, wire.MaxRetry)
		h.ReqEBSN, h.DataEBSN, h.TxTime, h.TxEcho = f.ReqEBSN, f.DataEBSN, f.TxTime, f.TxEcho
		want := make([]byte, 400)
		m, err := tmpl.Encode(want, &h, payload)
		require.NoError(t, err)
		require.Equal(t, want[:m], frame[:n], "case %d (seed %d): %v %v", i, seed, typ, a)
		_, err = wire.DecodeFrame(frame[:n])
		require.NoError(t, err, "case %d (seed %d)", i, seed)
	}
}

// TestUpdateChecksumMatchesFull: replacing words of random data and
// updating the checksum incrementally gives the checksum computed afresh,
// the IPv4 header rule (a 0 stays 0) included.
func TestUpdateChecksumMatchesFull(t *testing.T) {
	const seed = 44
	r := newRand(seed)
	for i := range 20000 {
		data := randBytes(r, 2*(1+r.IntN(40)))
		switch i % 4 { // sums near the edges of one's-complement arithmetic
		case 1:
			clear(data)
		case 2:
			for j := range data {
				data[j] = 0xff
			}
		}
		data[0], data[1] = 0, 0 // the checksum field
		ck := wire.IPv4HeaderChecksum(data)
		binary.BigEndian.PutUint16(data, ck)
		require.Zero(t, wire.IPv4HeaderChecksum(data), "case %d (seed %d): a stored checksum verifies", i, seed)

		// Replace one word after the checksum field, as a router lowers a TTL.
		k := 2 + 2*r.IntN(len(data)/2)
		if k >= len(data) {
			continue
		}
		old := binary.BigEndian.Uint16(data[k:])
		nw := uint16(r.Uint32())
		if i%5 == 0 {
			nw = ^old
		}
		binary.BigEndian.PutUint16(data[k:], nw)
		if allZero(data[2:]) {
			// The one sum that is +0 rather than -0 (0xffff): no IPv4
			// header (version 4) or UDP datagram (length >= 8) has it.
			continue
		}
		got := wire.UpdateChecksum(ck, old, nw)
		binary.BigEndian.PutUint16(data, 0)
		want := wire.IPv4HeaderChecksum(data)
		require.Equal(t, want, got, "case %d (seed %d): word %d %#04x -> %#04x", i, seed, k, old, nw)
	}
}

// TestUDPFrameGolden pins the bytes of the generators' frame (app/traffic,
// bench/kgen): Ethernet/IPv4/UDP, DF, TTL 64, no UDP checksum, from
// BenchmarkSrcIP to BenchmarkDstIP. The hex is what both generators built
// before they shared this builder.
func TestUDPFrameGolden(t *testing.T) {
	a := wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: wire.BenchmarkSrcIP, DstIP: wire.BenchmarkDstIP,
		SrcPort: 10007, DstPort: 9, NoUDPChecksum: true,
	}
	const want = "020000000002020000000001080045000032000040004011ae93c6120001c612000227170009001e000000000000000000000000000000000000000000000000"
	off, err := wire.DatagramOverhead(&a)
	require.NoError(t, err)
	require.Equal(t, 42, off)
	b := make([]byte, 64)
	n, err := wire.EncodeUDP(b, &a, 64-off)
	require.NoError(t, err)
	require.Equal(t, want, hex.EncodeToString(b[:n]))

	tmpl, err := wire.NewFrameTemplate(&a)
	require.NoError(t, err)
	p := make([]byte, 64)
	for i := range p {
		p[i] = 0xee // PutUDP must write every header byte
	}
	clear(p[off:])
	tmpl.PutUDP(p, 10007)
	require.Equal(t, want, hex.EncodeToString(p))
	require.True(t, netip.MustParsePrefix("198.18.0.0/15").Contains(wire.BenchmarkSrcIP))
	require.True(t, netip.MustParsePrefix("198.18.0.0/15").Contains(wire.BenchmarkDstIP))
}

// TestPutUDPMatchesEncodeUDP: the template's per-frame path builds
// EncodeUDP's bytes for every length and source port, IPv6 and the UDP
// checksum included.
func TestPutUDPMatchesEncodeUDP(t *testing.T) {
	const seed = 45
	r := newRand(seed)
	for i := range 3000 {
		a := addrs4()
		if i%2 == 1 {
			a = addrs6()
		}
		a.NoUDPChecksum = i%3 == 0
		tmpl, err := wire.NewFrameTemplate(&a)
		require.NoError(t, err)
		off := tmpl.HeaderLen()
		size := max(wire.MinFrameLen, off) + r.IntN(1500)
		port := uint16(r.Uint32())
		if i%7 == 0 {
			port = 0
		}
		a.SrcPort = port
		want := make([]byte, size)
		copy(want[off:], randBytes(r, size-off))
		got := append([]byte(nil), want...)
		n, err := wire.EncodeUDP(want, &a, size-off)
		require.NoError(t, err)
		require.Equal(t, size, n)
		if port == 0 { // EncodeUDP reads 0 as DefaultPort; PutUDP writes what it is given
			port = wire.DefaultPort
		}
		tmpl.PutUDP(got, port)
		require.Equal(t, want, got, "case %d (seed %d): %v", i, seed, a)
		d, err := wire.DecodeUDP(got)
		require.NoError(t, err, "case %d (seed %d)", i, seed)
		require.Equal(t, size-off, len(d.Data))
	}
}

func TestEncodeUDPErrors(t *testing.T) {
	a := addrs4()
	_, err := wire.EncodeUDP(make([]byte, 100), &wire.Addrs{}, 10)
	require.ErrorIs(t, err, wire.ErrAddr)
	_, err = wire.EncodeUDP(make([]byte, 100), &a, -1)
	require.ErrorIs(t, err, wire.ErrField)
	_, err = wire.EncodeUDP(make([]byte, 100), &a, 100)
	require.ErrorIs(t, err, wire.ErrShort)
	_, err = wire.EncodeUDP(make([]byte, 50), &a, 0)
	require.ErrorIs(t, err, wire.ErrShort, "no room to pad to MinFrameLen")
	n, err := wire.EncodeUDP(make([]byte, 60), &a, 0)
	require.NoError(t, err)
	require.Equal(t, wire.MinFrameLen, n)
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
