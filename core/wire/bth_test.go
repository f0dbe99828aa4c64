package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func randBTH(r *rand.Rand) wire.BTH {
	return wire.BTH{
		Opcode:    uint8(r.Uint32()),
		Solicited: r.IntN(2) == 0,
		MigReq:    r.IntN(2) == 0,
		PadCount:  uint8(r.IntN(4)),
		PKey:      uint16(r.Uint32()),
		FECN:      r.IntN(2) == 0,
		BECN:      r.IntN(2) == 0,
		DestQP:    r.Uint32() & wire.MaxQPN,
		AckReq:    r.IntN(2) == 0,
		PSN:       r.Uint32() & (1<<24 - 1),
	}
}

func TestBTHRoundTrip(t *testing.T) {
	r := newRand(21)
	b := make([]byte, wire.BTHLen)
	for range 5000 {
		h := randBTH(r)
		n, err := h.Encode(b)
		require.NoError(t, err)
		require.Equal(t, wire.BTHLen, n)
		got, n, err := wire.DecodeBTH(b)
		require.NoError(t, err)
		require.Equal(t, wire.BTHLen, n)
		require.Equal(t, h, got)
	}
}

func TestBTHGolden(t *testing.T) {
	h := wire.BTH{
		Opcode: 0x04, Solicited: true, PadCount: 2, PKey: 0xffff,
		FECN: true, DestQP: 0x000011, AckReq: true, PSN: 0x123456,
	}
	golden := []byte{
		0x04, 0xa0, 0xff, 0xff, // RC SEND Only; SE, pad 2, TVer 0; P_Key
		0x80, 0x00, 0x00, 0x11, // FECN; destination QP
		0x80, 0x12, 0x34, 0x56, // AckReq; PSN
	}
	b := make([]byte, wire.BTHLen)
	_, err := h.Encode(b)
	require.NoError(t, err)
	require.Equal(t, golden, b)
	got, _, err := wire.DecodeBTH(golden)
	require.NoError(t, err)
	require.Equal(t, h, got)

	// Reserved bits are ignored.
	golden[4] |= 0x3f
	golden[8] |= 0x7f
	got, _, err = wire.DecodeBTH(golden)
	require.NoError(t, err)
	require.Equal(t, h, got)
}

func TestBTHErrors(t *testing.T) {
	h := wire.BTH{Opcode: 0x0a, DestQP: 5, PSN: 6}
	b := make([]byte, wire.BTHLen)
	_, err := h.Encode(b)
	require.NoError(t, err)
	for i := range wire.BTHLen {
		_, _, err := wire.DecodeBTH(b[:i])
		require.ErrorIs(t, err, wire.ErrShort)
		_, err = h.Encode(b[:i])
		require.ErrorIs(t, err, wire.ErrShort)
	}
	b[1] |= 0x01
	_, _, err = wire.DecodeBTH(b)
	require.ErrorIs(t, err, wire.ErrVersion)

	for _, bad := range []wire.BTH{{PadCount: 4}, {DestQP: 1 << 24}, {PSN: 1 << 24}} {
		_, err := bad.Encode(make([]byte, wire.BTHLen))
		require.ErrorIs(t, err, wire.ErrField)
	}
	_, err = (&wire.BTH{TVer: 1}).Encode(make([]byte, wire.BTHLen))
	require.ErrorIs(t, err, wire.ErrVersion)
}

func TestBTHOpcodeName(t *testing.T) {
	for op, want := range map[uint8]string{
		0x04: "RC SEND Only",
		0x0a: "RC RDMA WRITE Only",
		0x0c: "RC RDMA READ Request",
		0x11: "RC Acknowledge",
		0x24: "UC SEND Only",
		0x64: "UD SEND Only",
		0x81: "CNP",
		0x15: "RC opcode 21",
		0xff: "Manufacturer opcode 31",
	} {
		require.Equal(t, want, wire.BTHOpcodeName(op), "%#x", op)
	}
	h := wire.BTH{Opcode: 0x04, DestQP: 0x11, PSN: 9}
	require.Contains(t, h.String(), "RC SEND Only qp=0x000011 psn=9")
}

func encodeRoCE(t testing.TB, a *wire.Addrs, h *wire.BTH, payload []byte) []byte {
	t.Helper()
	b := make([]byte, 256+len(payload))
	n, err := wire.EncodeRoCEFrame(b, a, h, payload)
	require.NoError(t, err)
	return b[:n]
}

func TestRoCEFrameRoundTrip(t *testing.T) {
	r := newRand(23)
	for _, base := range []wire.Addrs{addrs4(), addrs6()} {
		for _, size := range []int{0, 4, 16, 256, 1024} {
			a := base
			a.DstPort = wire.RoCEv2Port
			a.NoUDPChecksum = !a.IPv6() && size%2 == 0
			h := randBTH(r)
			payload := randBytes(r, size)
			b := encodeRoCE(t, &a, &h, payload)
			require.GreaterOrEqual(t, len(b), wire.MinFrameLen)
			f, err := wire.DecodeRoCEFrame(b)
			require.NoError(t, err)
			require.Equal(t, a, f.Addrs)
			require.Equal(t, h, f.BTH)
			require.Equal(t, payload, f.Payload)
		}
	}
}

// The ICRC is invariant: routers may rewrite TTL, DSCP/ECN, the flow label
// and the BTH's FECN/BECN byte without breaking it, but nothing else.
func TestRoCEICRCInvariant(t *testing.T) {
	h := wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: 0x11, PSN: 1}
	payload := []byte("0123456789abcdef")

	a := addrs4()
	a.DstPort = wire.RoCEv2Port
	a.NoUDPChecksum = true
	b := encodeRoCE(t, &a, &h, payload)
	mutable := append([]byte(nil), b...)
	mutable[15] = 0xff // TOS: CE
	mutable[22]--      // TTL
	mutable[34+8+4] |= 0x80
	fixChecksums(mutable)
	f, err := wire.DecodeRoCEFrame(mutable)
	require.NoError(t, err, "a router's rewrite must not break the ICRC")
	require.True(t, f.BTH.FECN)

	for _, i := range []int{34 + 8 + 0, 34 + 8 + 7, 34 + 8 + 11, 34 + 8 + 12, len(b) - 5, len(b) - 1, 26} {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x01
		fixChecksums(bad)
		_, err := wire.DecodeRoCEFrame(bad)
		require.ErrorIs(t, err, wire.ErrChecksum, "byte %d", i)
	}

	a6 := addrs6()
	a6.DstPort = wire.RoCEv2Port
	b = encodeRoCE(t, &a6, &h, payload)
	mutable = append([]byte(nil), b...)
	mutable[14] = 0x6f // traffic class high nibble
	mutable[15] = 0xff // traffic class low nibble, flow label
	mutable[21] = 1    // hop limit
	fixChecksums(mutable)
	_, err = wire.DecodeRoCEFrame(mutable)
	require.NoError(t, err)
	bad := append([]byte(nil), b...)
	bad[22] ^= 0x01 // source address
	fixChecksums(bad)
	_, err = wire.DecodeRoCEFrame(bad)
	require.ErrorIs(t, err, wire.ErrChecksum)
}

func TestRoCEFrameErrors(t *testing.T) {
	h := wire.BTH{Opcode: 0x04, DestQP: 0x11, PSN: 1}
	a := addrs4()
	a.DstPort = wire.RoCEv2Port
	b := encodeRoCE(t, &a, &h, []byte("abcd"))
	end := 14 + 20 + 8 + 12 + 4 + 4
	for i := range end {
		_, err := wire.DecodeRoCEFrame(b[:i])
		require.Error(t, err, "length %d", i)
	}
	// A datagram too short to hold BTH and ICRC.
	short := append([]byte(nil), b[:14+20+8+12]...)
	setIPLengths(short, false, -(4 + 4))
	fixChecksums(short)
	_, err := wire.DecodeRoCEFrame(short)
	require.ErrorIs(t, err, wire.ErrShort)

	bad := h
	bad.PSN = 1 << 24
	_, err = wire.EncodeRoCEFrame(make([]byte, 128), &a, &bad, nil)
	require.ErrorIs(t, err, wire.ErrField)
	_, err = wire.EncodeRoCEFrame(make([]byte, 59), &a, &h, nil)
	require.ErrorIs(t, err, wire.ErrShort, "no room for padding")
}

// A RoCEv2 CNP captured on a Mellanox ConnectX-4 Lx (from scapy's RoCE
// tests): our ICRC must match the hardware's.
func TestRoCEICRCKnownAnswer(t *testing.T) {
	frame := []byte{
		0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00,
		0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61,
		0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, // 10.0.17.1 → 10.0.18.1
		0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, // UDP → 4791, no checksum
		0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, // CNP, BECN, QP 0x118
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // CNP padding
		0x82, 0xfd, 0x00, 0x2a, // ICRC
	}
	f, err := wire.DecodeRoCEFrame(frame)
	require.NoError(t, err)
	require.Equal(t, wire.BTH{Opcode: 0x81, PKey: 0xffff, BECN: true, DestQP: 0x118}, f.BTH)
	require.Equal(t, "CNP", wire.BTHOpcodeName(f.BTH.Opcode))
	require.Len(t, f.Payload, 16)

	// DecodeRoCEFrame verified the ICRC; make sure it really looked.
	frame[len(frame)-1] ^= 1
	_, err = wire.DecodeRoCEFrame(frame)
	require.ErrorIs(t, err, wire.ErrChecksum)
}
