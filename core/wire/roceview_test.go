package wire_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

func TestBTHExtHeaders(t *testing.T) {
	for _, c := range []struct {
		op  uint8
		ext wire.IBExt
		n   int
	}{
		{0x04, 0, 0},
		{0x0a, wire.IBExtRDMA, 16},
		{0x0b, wire.IBExtRDMA | wire.IBExtImm, 20},
		{0x0c, wire.IBExtRDMA, 16},
		{0x11, wire.IBExtAck, 4},
		{0x12, wire.IBExtAck | wire.IBExtAtomicAck, 12},
		{0x13, wire.IBExtAtomic, 28},
		{0x17, wire.IBExtInv, 4},
		{0x24, 0, 0},                                   // UC SEND Only
		{0x2a, wire.IBExtRDMA, 16},                     // UC RDMA WRITE Only
		{0x44, wire.IBExtRD | wire.IBExtDatagram, 12},  // RD SEND Only
		{0x51, wire.IBExtRD | wire.IBExtAck, 8},        // RD Acknowledge
		{0x64, wire.IBExtDatagram, 8},                  // UD SEND Only
		{0x65, wire.IBExtDatagram | wire.IBExtImm, 12}, // UD SEND Only with Immediate
		{0xaa, wire.IBExtXRC | wire.IBExtRDMA, 20},     // XRC RDMA WRITE Only
		{0x81, 0, 0},                                   // CNP
	} {
		ext, n, ok := wire.BTHExtHeaders(c.op)
		require.True(t, ok, "%#x", c.op)
		require.Equal(t, c.ext, ext, "%#x", c.op)
		require.Equal(t, c.n, n, "%#x", c.op)
	}
	for _, op := range []uint8{0x15, 0x18, 0x1f, 0x2c, 0x60, 0x80, 0xe0} {
		_, _, ok := wire.BTHExtHeaders(op)
		require.False(t, ok, "%#x", op)
	}
	require.Equal(t, 16, wire.IBExtOffset(wire.IBExtRDMA|wire.IBExtImm, wire.IBExtImm))
	require.Equal(t, 4, wire.IBExtOffset(wire.IBExtRD|wire.IBExtDatagram, wire.IBExtDatagram))
}

func TestRETHAETH(t *testing.T) {
	r := wire.RETH{VA: 0x1122334455667788, RKey: 0xaabbccdd, DMALen: 4096}
	b := make([]byte, wire.RETHLen)
	r.Put(b)
	got, err := wire.DecodeRETH(b)
	require.NoError(t, err)
	require.Equal(t, r, got)
	_, err = wire.DecodeRETH(b[:15])
	require.ErrorIs(t, err, wire.ErrShort)
	a := wire.AETH{Syndrome: 0x60 | 3, MSN: 0xabcdef}
	a.Put(b)
	ga, err := wire.DecodeAETH(b)
	require.NoError(t, err)
	require.Equal(t, a, ga)
	require.Equal(t, "NAK code=3 msn=11259375", ga.String())
	require.Equal(t, "RNR-NAK timer=5 msn=1", wire.AETH{Syndrome: 0x25, MSN: 1}.String())
}

// ParseRoCE finds what DecodeRoCEFrame finds; the in-place ICRC equals
// the copying one and leaves the frame as it was.
func TestParseRoCEAndInPlaceICRC(t *testing.T) {
	r := newRand(31)
	for _, base := range []wire.Addrs{addrs4(), addrs6()} {
		for _, size := range []int{0, 4, 16, 20, 256, 1024, 4000} {
			a := base
			a.DstPort = wire.RoCEv2Port
			a.NoUDPChecksum = !a.IPv6() && size%8 == 0
			h := randBTH(r)
			h.Opcode = []uint8{0x04, 0x0a, 0x11, 0x0c, 0x64}[size%5]
			_, n, _ := wire.BTHExtHeaders(h.Opcode)
			if size < n {
				size = n
			}
			h.PadCount = 0
			payload := randBytes(r, size)
			b := encodeRoCE(t, &a, &h, payload)
			f, err := wire.DecodeRoCEFrame(b)
			require.NoError(t, err)
			var v wire.RoCEView
			require.NoError(t, wire.ParseRoCE(b, wire.RoCEv2Port, &v))
			require.Equal(t, a.IPv6(), v.IPv6)
			require.Equal(t, h.Opcode, v.Opcode)
			require.Equal(t, h.DestQP, v.DestQP)
			require.Equal(t, h.PSN, v.PSN)
			require.Equal(t, f.DataOff+wire.BTHLen, v.ExtOff)
			require.Equal(t, f.DataOff+len(f.Data)-wire.ICRCLen, v.ICRCOff)
			before := append([]byte(nil), b...)
			require.Equal(t, f.ICRC, v.ICRC(b))
			require.Equal(t, before, b, "ICRC leaves the frame as it was")
			require.True(t, v.CheckICRC(b))

			// A rewrite of the destination QP and P_Key, patched or
			// recomputed, gives the ICRC a fresh encode would.
			u := wire.NewICRCUpdater(9000)
			for round := range 3 {
				old := binary.BigEndian.Uint64(b[v.BTHOff:])
				qp, pkey := r.Uint32()&wire.MaxQPN, uint16(r.Uint32())
				v.SetDestQP(b, qp)
				v.SetPKey(b, pkey)
				patched := u.Patch(&v, b, old)
				require.Equal(t, round > 0, patched, "the second frame of a length builds the tables")
				if !patched {
					v.PutICRC(b)
				}
				g, err := wire.DecodeRoCEFrame(b)
				require.NoError(t, err, "round %d: ICRC and UDP checksum after rewrite", round)
				require.Equal(t, qp, g.BTH.DestQP)
				require.Equal(t, pkey, g.BTH.PKey)
			}
			require.Equal(t, uint64(1), u.Builds)
		}
	}
}

func TestParseRoCEErrors(t *testing.T) {
	a := addrs4()
	a.DstPort = wire.RoCEv2Port
	a.NoUDPChecksum = true
	h := wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: 3, PSN: 4}
	b := encodeRoCE(t, &a, &h, []byte("abcdefgh"))
	var v wire.RoCEView
	for i := range 14 + 20 + 8 + 12 + 4 {
		err := wire.ParseRoCE(b[:i], wire.RoCEv2Port, &v)
		require.Error(t, err, "length %d", i)
	}
	require.ErrorIs(t, wire.ParseRoCE(b, 4792, &v), wire.ErrNotRoCE)
	bad := append([]byte(nil), b...)
	bad[12] = 0x08
	bad[13] = 0x06 // ARP
	require.ErrorIs(t, wire.ParseRoCE(bad, wire.RoCEv2Port, &v), wire.ErrNotRoCE)
	bad = append([]byte(nil), b...)
	bad[42] = 0x15 // RC opcode 21: reserved
	require.ErrorIs(t, wire.ParseRoCE(bad, wire.RoCEv2Port, &v), wire.ErrType)
	bad = append([]byte(nil), b...)
	bad[43] |= 1 // TVer 1
	require.ErrorIs(t, wire.ParseRoCE(bad, wire.RoCEv2Port, &v), wire.ErrVersion)
	bad = append([]byte(nil), b...)
	bad[39]++ // UDP length
	require.ErrorIs(t, wire.ParseRoCE(bad, wire.RoCEv2Port, &v), wire.ErrLength)
}

// FuzzParseRoCE: no panic on any frame; a frame it accepts has offsets in
// order inside the buffer, and the ICRC leaves it as it was.
func FuzzParseRoCE(f *testing.F) {
	r := newRand(33)
	for _, base := range []wire.Addrs{addrs4(), addrs6()} {
		a := base
		a.DstPort = wire.RoCEv2Port
		for _, op := range []uint8{0x04, 0x0a, 0x11, 0x64, 0x81} {
			h := wire.BTH{Opcode: op, DestQP: 7, PSN: 9}
			f.Add(encodeRoCE(f, &a, &h, randBytes(r, 32)))
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var v wire.RoCEView
		if wire.ParseRoCE(b, wire.RoCEv2Port, &v) != nil {
			return
		}
		if !(v.L3Off >= 8 && v.L3Off < v.L4Off && v.L4Off < v.BTHOff && v.BTHOff+wire.BTHLen == v.ExtOff &&
			v.ExtOff <= v.DataOff && v.DataOff <= v.ICRCOff && v.ICRCOff+wire.ICRCLen <= len(b)) {
			t.Fatalf("offsets out of order: %+v in %d bytes", v, len(b))
		}
		before := append([]byte(nil), b...)
		v.ICRC(b)
		if !bytes.Equal(before, b) {
			t.Fatal("ICRC changed the frame")
		}
	})
}

func TestLRHConstant(t *testing.T) {
	require.Equal(t, crc32.Update(0, crc32.IEEETable, bytes.Repeat([]byte{0xff}, 8)), wire.LRHCRCForTest)
}
