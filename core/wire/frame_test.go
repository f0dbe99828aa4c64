package wire_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func encodeFrame(t testing.TB, a *wire.Addrs, h *wire.Header, payload []byte) []byte {
	t.Helper()
	b := make([]byte, 2048+len(payload))
	n, err := wire.EncodeFrame(b, a, h, payload)
	require.NoError(t, err)
	return b[:n]
}

func TestFrameRoundTrip(t *testing.T) {
	r := newRand(5)
	for _, family := range []struct {
		name  string
		addrs func() wire.Addrs
	}{{"ipv4", addrs4}, {"ipv6", addrs6}} {
		t.Run(family.name, func(t *testing.T) {
			for _, size := range []int{0, 1, 2, 3, 7, 31, 64, 333, 1400, 8000} {
				for _, typ := range allTypes {
					a := family.addrs()
					payload := randBytes(r, size)
					h := randHeader(r, typ, size)
					b := encodeFrame(t, &a, &h, payload)
					f, err := wire.DecodeFrame(b)
					require.NoError(t, err, "%v size %d", typ, size)
					require.Equal(t, a, f.Addrs)
					require.Equal(t, h, f.Header)
					require.Equal(t, payload, f.Payload)
					require.Equal(t, len(b), f.Len)
					require.Equal(t, wire.EthHeaderLen, f.L3Off)
					require.Equal(t, h.Len(), f.HeaderLen)
					require.Equal(t, f.DataOff+f.HeaderLen, f.PayloadOff)
					require.Equal(t, payload, b[f.PayloadOff:f.PayloadOff+size])

					// The checksums agree with a plain RFC 1071 implementation.
					if a.IPv6() {
						require.Equal(t, wire.EthHeaderLen+wire.IPv6HeaderLen, f.L4Off)
					} else {
						require.Equal(t, uint16(0), refChecksum(b[14:34]))
						require.Equal(t, wire.EthHeaderLen+wire.IPv4HeaderLen, f.L4Off)
					}
					fixed := append([]byte(nil), b...)
					fixChecksums(fixed)
					require.Equal(t, b, fixed, "checksums differ from the reference")

					cid, ok := wire.PeekCID(b, f.L4Off)
					require.True(t, ok)
					require.Equal(t, h.DestCID, cid)
					off, ok := wire.L4Offset(b)
					require.True(t, ok)
					require.Equal(t, f.L4Off, off)
				}
			}
		})
	}
}

func TestFrameRandomAddresses(t *testing.T) {
	r := newRand(11)
	for i := range 2000 {
		var a wire.Addrs
		copy(a.SrcMAC[:], randBytes(r, 6))
		copy(a.DstMAC[:], randBytes(r, 6))
		a.SrcPort, a.DstPort = uint16(1+r.IntN(65535)), uint16(1+r.IntN(65535))
		a.TOS = uint8(r.Uint32())
		a.TTL = uint8(1 + r.IntN(255))
		if r.IntN(2) == 0 {
			a.SrcIP = netip.AddrFrom4([4]byte(randBytes(r, 4)))
			a.DstIP = netip.AddrFrom4([4]byte(randBytes(r, 4)))
			a.NoUDPChecksum = r.IntN(4) == 0
		} else {
			a.SrcIP = netip.AddrFrom16([16]byte(randBytes(r, 16)))
			a.DstIP = netip.AddrFrom16([16]byte(randBytes(r, 16)))
			a.FlowLabel = r.Uint32() & (1<<20 - 1)
		}
		payload := randBytes(r, r.IntN(200))
		h := randHeader(r, allTypes[r.IntN(len(allTypes))], len(payload))
		b := encodeFrame(t, &a, &h, payload)
		f, err := wire.DecodeFrame(b)
		require.NoError(t, err, "iteration %d", i)
		require.Equal(t, a, f.Addrs, "iteration %d", i)
		require.Equal(t, h, f.Header, "iteration %d", i)
		require.Equal(t, payload, f.Payload, "iteration %d", i)
	}
}

func TestFrameDefaults(t *testing.T) {
	a := addrs4()
	a.SrcPort, a.DstPort, a.TTL = 0, 0, 0
	h := sampleHeader()
	b := encodeFrame(t, &a, &h, []byte("x"))
	f, err := wire.DecodeFrame(b)
	require.NoError(t, err)
	require.Equal(t, uint16(wire.DefaultPort), f.SrcPort)
	require.Equal(t, uint16(wire.DefaultPort), f.DstPort)
	require.Equal(t, uint8(wire.DefaultTTL), f.TTL)
	require.Equal(t, byte(0x40), b[20], "IPv4 DF must be set")
}

func TestFrameNoUDPChecksum(t *testing.T) {
	a := addrs4()
	a.NoUDPChecksum = true
	h := sampleHeader()
	b := encodeFrame(t, &a, &h, []byte("no checksum"))
	require.Equal(t, []byte{0, 0}, b[40:42])
	f, err := wire.DecodeFrame(b)
	require.NoError(t, err)
	require.True(t, f.NoUDPChecksum)
	b[len(b)-1] ^= 0xff // undetectable without a checksum
	_, err = wire.DecodeFrame(b)
	require.NoError(t, err)

	// IPv6 ignores the option: the checksum is mandatory.
	a6 := addrs6()
	a6.NoUDPChecksum = true
	b = encodeFrame(t, &a6, &h, []byte("checksum anyway"))
	require.NotEqual(t, []byte{0, 0}, b[60:62])
	f, err = wire.DecodeFrame(b)
	require.NoError(t, err)
	require.False(t, f.NoUDPChecksum)
	b[60], b[61] = 0, 0
	_, err = wire.DecodeFrame(b)
	require.ErrorIs(t, err, wire.ErrChecksum, "IPv6 UDP without a checksum must be refused")
}

// Corrupting any byte the UDP checksum covers is caught: the transport
// header, its payload, the ports and the checksum itself.
func TestFrameChecksumCatchesEveryByte(t *testing.T) {
	r := newRand(13)
	for _, a := range []wire.Addrs{addrs4(), addrs6()} {
		h := randHeader(r, wire.TypePushSolicitedData, 100)
		b := encodeFrame(t, &a, &h, randBytes(r, 100))
		l4, ok := wire.L4Offset(b)
		require.True(t, ok)
		for i := l4; i < len(b); i++ {
			if i == l4+4 || i == l4+5 {
				continue // the UDP length: ErrLength, tested below
			}
			for _, x := range []byte{0x01, 0x80, 0xff} {
				orig := b[i]
				b[i] ^= x
				if i == l4+6 || i == l4+7 {
					if b[l4+6] == 0 && b[l4+7] == 0 && !a.IPv6() {
						b[i] = orig
						continue // checksum 0 means none on IPv4
					}
				}
				_, err := wire.DecodeFrame(b)
				require.ErrorIs(t, err, wire.ErrChecksum, "byte %d ^ %#x (v6=%v)", i, x, a.IPv6())
				b[i] = orig
			}
		}
		b[l4+5]++
		_, err := wire.DecodeFrame(b)
		require.ErrorIs(t, err, wire.ErrLength)
	}
}

// A single bit flip in an IP address is caught by the pseudo-header.
func TestFrameChecksumCoversAddresses(t *testing.T) {
	h := sampleHeader()
	a := addrs4()
	b := encodeFrame(t, &a, &h, []byte("abc"))
	b[29] ^= 1 // source address, IPv4 header checksum fixed up below
	b[24], b[25] = 0, 0
	c := refChecksum(b[14:34])
	b[24], b[25] = byte(c>>8), byte(c)
	_, err := wire.DecodeFrame(b)
	require.ErrorIs(t, err, wire.ErrChecksum)

	a6 := addrs6()
	b = encodeFrame(t, &a6, &h, []byte("abc"))
	b[30] ^= 4 // destination address
	_, err = wire.DecodeFrame(b)
	require.ErrorIs(t, err, wire.ErrChecksum)
}

func TestFrameTruncatedEveryLength(t *testing.T) {
	r := newRand(17)
	for _, a := range []wire.Addrs{addrs4(), addrs6()} {
		h := randHeader(r, wire.TypeExtendedAck, 0)
		h.Ext = fillExt(wire.Ext{Present: wire.ExtPlacement})
		h.Flags |= wire.FlagHasExtension
		b := encodeFrame(t, &a, &h, nil)
		for i := range len(b) {
			_, err := wire.DecodeFrame(b[:i])
			require.Error(t, err, "truncated to %d of %d", i, len(b))
		}
		// Truncation that is repaired in the length fields and checksums is
		// still caught by the transport header's payload length.
		h2 := randHeader(r, wire.TypePullData, 50)
		b = encodeFrame(t, &a, &h2, randBytes(r, 50))
		cut := append([]byte(nil), b[:len(b)-1]...)
		setIPLengths(cut, a.IPv6(), -1)
		fixChecksums(cut)
		_, err := wire.DecodeFrame(cut)
		require.ErrorIs(t, err, wire.ErrLength)
	}
}

// setIPLengths adds delta to the IP and UDP length fields of a frame.
func setIPLengths(b []byte, v6 bool, delta int) {
	add := func(i int) {
		v := int(b[i])<<8 | int(b[i+1]) + delta
		b[i], b[i+1] = byte(v>>8), byte(v)
	}
	if v6 {
		add(18)
		add(54 + 4)
	} else {
		add(16)
		add(34 + 4)
	}
}

func TestFrameEthernetPadding(t *testing.T) {
	h := sampleHeader()
	a := addrs4()
	b := encodeFrame(t, &a, &h, []byte("hi"))
	n := len(b)
	padded := append(b, make([]byte, 20)...)
	f, err := wire.DecodeFrame(padded)
	require.NoError(t, err)
	require.Equal(t, n, f.Len)
	require.Equal(t, []byte("hi"), f.Payload)
}

func TestFrameDecodeErrors(t *testing.T) {
	h := sampleHeader()
	a4, a6 := addrs4(), addrs6()
	v4 := func() []byte { return encodeFrame(t, &a4, &h, []byte("payload")) }
	v6 := func() []byte { return encodeFrame(t, &a6, &h, []byte("payload")) }
	fixed := func(b []byte) []byte { fixChecksums(b); return b }
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"vlan tag", func() []byte { b := v4(); b[12], b[13] = 0x81, 0x00; return b }(), wire.ErrNotIP},
		{"arp", func() []byte { b := v4(); b[12], b[13] = 0x08, 0x06; return b }(), wire.ErrNotIP},
		{"ipv4 ethertype, version 6", func() []byte { b := v4(); b[14] = 0x65; return b }(), wire.ErrIPHeader},
		{"ipv4 ihl 4", func() []byte { b := v4(); b[14] = 0x44; return b }(), wire.ErrIPHeader},
		{"ipv4 header checksum", func() []byte { b := v4(); b[22]--; return b }(), wire.ErrChecksum},
		{"ipv4 total length past the frame", func() []byte { b := v4(); b[17] += 10; return fixed(b) }(), wire.ErrShort},
		{"ipv4 total length below ihl", func() []byte { b := v4(); b[16], b[17] = 0, 19; return fixed(b) }(), wire.ErrLength},
		{"ipv4 total length cuts udp header", func() []byte { b := v4(); b[16], b[17] = 0, 24; return fixed(b) }(), wire.ErrLength},
		{"ipv4 more fragments", func() []byte { b := v4(); b[20] |= 0x20; return fixed(b) }(), wire.ErrFragment},
		{"ipv4 fragment offset", func() []byte { b := v4(); b[21] = 1; return fixed(b) }(), wire.ErrFragment},
		{"ipv4 tcp", func() []byte { b := v4(); b[23] = 6; return fixed(b) }(), wire.ErrNotUDP},
		{"ipv6 ethertype, version 4", func() []byte { b := v6(); b[14] = 0x45; return b }(), wire.ErrIPHeader},
		{"ipv6 payload length past the frame", func() []byte { b := v6(); b[19] += 1; return b }(), wire.ErrShort},
		{"ipv6 extension header", func() []byte { b := v6(); b[20] = 0; return b }(), wire.ErrNotUDP},
		{"udp length above ip", func() []byte { b := v4(); b[39]++; return fixed(b) }(), wire.ErrLength},
		{"udp length below ip", func() []byte { b := v4(); b[39]--; return fixed(b) }(), wire.ErrLength},
		{"transport version", func() []byte { b := v4(); b[42] = 0x20; return fixed(b) }(), wire.ErrVersion},
		{"transport type", func() []byte { b := v6(); b[66] = 0; return fixed(b) }(), wire.ErrType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := wire.DecodeFrame(tc.frame)
			require.ErrorIs(t, err, tc.want)
			require.Zero(t, f.Len)
		})
	}
}

// Receivers accept IPv4 options even though senders never write them.
func TestFrameIPv4Options(t *testing.T) {
	h := sampleHeader()
	a := addrs4()
	b := encodeFrame(t, &a, &h, []byte("opts"))
	withOpts := append(append(append([]byte(nil), b[:34]...), 1, 1, 1, 0), b[34:]...) // NOP NOP NOP EOL
	withOpts[14] = 0x46
	withOpts[17] += 4
	fixChecksums(withOpts)
	f, err := wire.DecodeFrame(withOpts)
	require.NoError(t, err)
	require.Equal(t, 38, f.L4Off)
	require.Equal(t, h.DestCID, f.Header.DestCID)
	require.Equal(t, []byte("opts"), f.Payload)
	off, ok := wire.L4Offset(withOpts)
	require.True(t, ok)
	require.Equal(t, 38, off)
}

func TestEncodeFrameErrors(t *testing.T) {
	h := sampleHeader()
	a := addrs4()
	a.DstIP = netip.MustParseAddr("fd00::2")
	_, err := wire.EncodeFrame(make([]byte, 256), &a, &h, nil)
	require.ErrorIs(t, err, wire.ErrAddr)

	a = addrs4()
	a.SrcIP = netip.Addr{}
	_, err = wire.EncodeFrame(make([]byte, 256), &a, &h, nil)
	require.ErrorIs(t, err, wire.ErrAddr)

	a = addrs4()
	a.FlowLabel = 1
	_, err = wire.EncodeFrame(make([]byte, 256), &a, &h, nil)
	require.ErrorIs(t, err, wire.ErrField)

	a6 := addrs6()
	a6.FlowLabel = 1 << 20
	_, err = wire.EncodeFrame(make([]byte, 256), &a6, &h, nil)
	require.ErrorIs(t, err, wire.ErrField)

	a = addrs4()
	bad := h
	bad.Retry = 99
	_, err = wire.EncodeFrame(make([]byte, 256), &a, &bad, nil)
	require.ErrorIs(t, err, wire.ErrField)

	_, err = wire.EncodeFrame(make([]byte, 1<<17), &a, &h, make([]byte, 70000))
	require.ErrorIs(t, err, wire.ErrField)
	_, err = wire.EncodeFrame(make([]byte, 1<<17), &a, &h, make([]byte, 65535-20-8-48+1))
	require.ErrorIs(t, err, wire.ErrField, "IPv4 total length overflows")
	_, err = wire.EncodeFrame(make([]byte, 1<<17), &a, &h, make([]byte, 65535-20-8-48))
	require.NoError(t, err)

	want := wire.EthHeaderLen + wire.IPv4HeaderLen + wire.UDPHeaderLen + h.Len() + 10
	for size := range want {
		_, err := wire.EncodeFrame(make([]byte, size), &a, &h, make([]byte, 10))
		require.ErrorIs(t, err, wire.ErrShort, "buffer of %d", size)
	}
	n, err := wire.EncodeFrame(make([]byte, want), &a, &h, make([]byte, 10))
	require.NoError(t, err)
	require.Equal(t, want, n)
}

// The zero-copy builder: payload placed first, headers written in front.
func TestEncodeFrameHeadersInPlace(t *testing.T) {
	h := sampleHeader()
	payload := []byte("already where it belongs")
	for _, a := range []wire.Addrs{addrs4(), addrs6()} {
		want := encodeFrame(t, &a, &h, payload)
		off, err := wire.FrameOverhead(&a, &h)
		require.NoError(t, err)
		b := make([]byte, 2048)
		copy(b[off:], payload)
		n, err := wire.EncodeFrameHeaders(b, &a, &h, len(payload))
		require.NoError(t, err)
		require.Equal(t, want, b[:n])
	}
}

// The retransmit path patches a buffered frame in place and reseals it.
func TestUpdateUDPChecksum(t *testing.T) {
	for _, a := range []wire.Addrs{addrs4(), addrs6()} {
		h := sampleHeader()
		b := encodeFrame(t, &a, &h, []byte("resend me"))
		f, err := wire.DecodeFrame(b)
		require.NoError(t, err)
		v, err := wire.ViewHeader(b[f.DataOff:])
		require.NoError(t, err)
		v.SetFlags(v.Flags() | wire.FlagRetransmission)
		v.SetRetry(v.Retry() + 1)
		v.SetTxTime(987654321)
		_, err = wire.DecodeFrame(b)
		require.ErrorIs(t, err, wire.ErrChecksum)
		require.NoError(t, f.UpdateUDPChecksum(b))
		g, err := wire.DecodeFrame(b)
		require.NoError(t, err)
		require.True(t, g.Header.Flags.Has(wire.FlagRetransmission))
		require.Equal(t, uint8(1), g.Header.Retry)
		require.Equal(t, uint32(987654321), g.Header.TxTime)
		require.ErrorIs(t, f.UpdateUDPChecksum(b[:len(b)-1]), wire.ErrShort)
	}
	a := addrs4()
	a.NoUDPChecksum = true
	h := sampleHeader()
	b := encodeFrame(t, &a, &h, nil)
	f, err := wire.DecodeFrame(b)
	require.NoError(t, err)
	require.NoError(t, f.UpdateUDPChecksum(b))
	require.Equal(t, []byte{0, 0}, b[40:42])
}

func TestPeekCIDAndL4Offset(t *testing.T) {
	h := sampleHeader()
	a := addrs4()
	b := encodeFrame(t, &a, &h, nil)
	cid, ok := wire.PeekCID(b, 34)
	require.True(t, ok)
	require.Equal(t, uint32(0x0a0b0c), cid)
	for _, off := range []int{-1, -1 << 62, len(b), len(b) - 11, 1 << 62} {
		_, ok = wire.PeekCID(b, off)
		require.False(t, ok, "offset %d", off)
	}
	for i := range 34 + 12 {
		_, ok := wire.PeekCID(b[:i], 34)
		require.False(t, ok, "length %d", i)
	}
	bad := append([]byte(nil), b...)
	bad[42] = 0x20
	_, ok = wire.PeekCID(bad, 34)
	require.False(t, ok, "wrong version")

	for i := range 42 {
		_, ok := wire.L4Offset(b[:i])
		require.False(t, ok, "length %d", i)
	}
	notUDP := append([]byte(nil), b...)
	notUDP[23] = 6
	_, ok = wire.L4Offset(notUDP)
	require.False(t, ok)
	notIP := append([]byte(nil), b...)
	notIP[12] = 0x81
	_, ok = wire.L4Offset(notIP)
	require.False(t, ok)
	a6 := addrs6()
	b6 := encodeFrame(t, &a6, &h, nil)
	off, ok := wire.L4Offset(b6)
	require.True(t, ok)
	require.Equal(t, 54, off)
	_, ok = wire.L4Offset(b6[:61])
	require.False(t, ok)
}

func TestHopsFromTTL(t *testing.T) {
	for _, c := range []struct{ ttl, hops uint8 }{
		{64, 0}, {63, 1}, {59, 5}, {33, 31}, // Linux and peregrine start at 64
		{32, 0}, {30, 2}, {1, 31}, {0, 32},
		{128, 0}, {120, 8}, {65, 63}, // Windows starts at 128
		{255, 0}, {250, 5}, {129, 126}, // routers and some stacks at 255
	} {
		require.Equal(t, c.hops, wire.HopsFromTTL(c.ttl), "ttl %d", c.ttl)
	}
}
