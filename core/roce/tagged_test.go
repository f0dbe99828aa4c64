package roce_test

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
)

// frameForm is one way a RoCEv2 frame may be laid out on the wire: VLAN
// tags after the MAC addresses (outermost first) and IPv4 options, in
// 32-bit words.
type frameForm struct {
	name    string
	tags    []uint16
	optWord int
	v6      bool
}

var forms = []frameForm{
	{name: "plain"},
	{name: "802.1Q", tags: []uint16{0x8100}},
	{name: "QinQ", tags: []uint16{0x88a8, 0x8100}},
	{name: "QinQ-9100", tags: []uint16{0x9100, 0x8100}},
	{name: "options", optWord: 1},
	{name: "options-max", optWord: 10},
	{name: "802.1Q+options", tags: []uint16{0x8100}, optWord: 3},
	{name: "QinQ+ipv6", tags: []uint16{0x88a8, 0x8100}, v6: true},
}

// shape lays an untagged, option-less frame out in form f: tags inserted,
// IPv4 options (NOPs) inserted with IHL, total length and header checksum
// fixed, and the ICRC recomputed by icrcOracle.
func shape(t testing.TB, plain []byte, f frameForm) []byte {
	t.Helper()
	b := append([]byte(nil), plain[:12]...)
	for i, tpid := range f.tags {
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, uint16(5+i))
	}
	b = append(b, plain[12:14]...)
	l3 := len(b)
	if f.optWord == 0 {
		b = append(b, plain[14:]...)
	} else {
		require.False(t, f.v6)
		ip := plain[14:]
		total := int(binary.BigEndian.Uint16(ip[2:]))
		b = append(b, ip[:20]...)
		for range f.optWord * 4 {
			b = append(b, 1) // NOP
		}
		b = append(b, ip[20:total]...)
		h := b[l3:]
		h[0] = 0x40 | byte(5+f.optWord)
		binary.BigEndian.PutUint16(h[2:], uint16(total+f.optWord*4))
		h[10], h[11] = 0, 0
		binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h[:20+f.optWord*4]))
	}
	icrcOracle(b, l3)
	return b
}

func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// icrcOracle writes the ICRC of the frame whose IP header starts at l3,
// computed the long way IBA describes it (a copy with the variant fields
// masked to ones, behind eight 0xFF bytes), sharing no code with
// core/wire. The frame must carry no UDP checksum, or IPv6's is refreshed.
func icrcOracle(b []byte, l3 int) {
	v6 := b[l3]>>4 == 6
	var l4, end int
	if v6 {
		l4 = l3 + 40
		end = l4 + int(binary.BigEndian.Uint16(b[l3+4:]))
	} else {
		l4 = l3 + int(b[l3]&0xf)*4
		end = l3 + int(binary.BigEndian.Uint16(b[l3+2:]))
	}
	c := append(make([]byte, 0, 8+end-l3), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	c = append(c, b[l3:end-4]...)
	ip := c[8:]
	if v6 {
		ip[0] |= 0x0f
		ip[1], ip[2], ip[3], ip[7] = 0xff, 0xff, 0xff, 0xff
	} else {
		ip[1], ip[8], ip[10], ip[11] = 0xff, 0xff, 0xff, 0xff
	}
	u := ip[l4-l3:]
	u[6], u[7] = 0xff, 0xff
	u[8+4] = 0xff
	binary.LittleEndian.PutUint32(b[end-4:], crc32.ChecksumIEEE(c))
	if v6 {
		b[l4+6], b[l4+7] = 0, 0
		s := uint32(0)
		add := func(p []byte) {
			for i := 0; i < len(p); i += 2 {
				w := uint32(p[i]) << 8
				if i+1 < len(p) {
					w |= uint32(p[i+1])
				}
				s += w
			}
		}
		add(b[l3+8 : l3+40])
		s += uint32(end-l4) + 17
		add(b[l4:end])
		for s > 0xffff {
			s = s&0xffff + s>>16
		}
		ck := ^uint16(s)
		if ck == 0 {
			ck = 0xffff
		}
		binary.BigEndian.PutUint16(b[l4+6:], ck)
	}
}

// untag removes the VLAN tags of a frame shaped as f, for decoders that
// read untagged frames only.
func untag(b []byte, f frameForm) []byte {
	n := 4 * len(f.tags)
	return append(append([]byte(nil), b[:12]...), b[12+n:]...)
}

// TestTaggedAndOptionedFramesAreTranslated: VLAN-tagged (one tag, QinQ)
// and IPv4-optioned RoCEv2 frames are checked and translated like plain
// ones — a stale QPN dropped, a bad ICRC dropped, the destination QP
// rewritten and the ICRC right afterwards (an oracle recomputes it) —
// in both directions, with their tags and options kept.
func TestTaggedAndOptionedFramesAreTranslated(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			r := newRig(t, roce.Options{})
			q, local, err := r.tb.Open(qpx.Context{DestQPN: 0x4242, PKey: 0x8001, ExpectedPSN: 7, NextPSN: 7, Access: qpx.AccessAll})
			require.NoError(t, err)
			stale, _, err := r.tb.Open(qpx.Context{})
			require.NoError(t, err)
			require.NoError(t, r.tb.Close(stale))
			a := addrs4()
			if f.v6 {
				a = addrs6()
			}
			frame := func(qp, psn uint32) []byte {
				return shape(t, build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x0a, PKey: 0xffff, DestQP: qp, PSN: psn},
					RETH: wire.RETH{VA: 0x1000, RKey: 7, DMALen: 16}, Payload: []byte("0123456789abcdef")}), f)
			}
			good := frame(q, 7)
			bad := frame(q, 8)
			bad[len(bad)-1] ^= 0x40
			r.send(r.netPeer, frame(stale, 7), bad, good)
			out := r.recv(r.hostPeer)
			require.Len(t, out, 1)
			s := r.stage.Stats().ToHost
			require.Equal(t, roce.DirStats{Received: 3, Forwarded: 1, DropRetired: 1, DropICRC: 1}, s)
			g := out[0]
			require.Equal(t, len(good), len(g))
			want := append([]byte(nil), good...)
			l3 := 14 + 4*len(f.tags)
			bth := l3 + 40 + 8
			if !f.v6 {
				bth = l3 + int(good[l3]&0xf)*4 + 8
			}
			binary.BigEndian.PutUint32(want[bth+4:], uint32(local))
			icrcOracle(want, l3)
			require.Equal(t, want, g, "tags and options kept, the destination QP and the ICRC rewritten")
			if f.optWord == 0 {
				d, err := wire.DecodeRoCEFrame(untag(g, f))
				require.NoError(t, err)
				require.Equal(t, uint32(local), d.BTH.DestQP)
			}
			require.Equal(t, uint32(8), r.tb.Context(local).ExpectedPSN)

			// Toward the network: the local number becomes the peer's QPN.
			r.send(r.hostPeer, frame(uint32(local), 7))
			out = r.recv(r.netPeer)
			require.Len(t, out, 1)
			want = frame(uint32(local), 7)
			binary.BigEndian.PutUint16(want[bth+2:], 0x8001)
			binary.BigEndian.PutUint32(want[bth+4:], 0x4242)
			icrcOracle(want, l3)
			require.Equal(t, want, out[0])
		})
	}
}

// TestUnsupportedRoCEIsDropped: a RoCEv2 datagram behind IPv6 extension
// headers, which the stage cannot locate, is counted and dropped, never
// passed on untranslated; other traffic behind the same headers passes.
func TestUnsupportedRoCEIsDropped(t *testing.T) {
	r := newRig(t, roce.Options{})
	q, _, err := r.tb.Open(qpx.Context{Access: qpx.AccessAll})
	require.NoError(t, err)
	plain := build(t, roce.FrameSpec{Addrs: addrs6(), BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: q}, Payload: make([]byte, 8)})
	// A hop-by-hop options header (8 bytes of PadN) and a destination
	// options header between the IPv6 header and UDP.
	withExt := func(b []byte, tags []uint16) []byte {
		o := append([]byte(nil), b[:12]...)
		for _, tp := range tags {
			o = binary.BigEndian.AppendUint16(o, tp)
			o = binary.BigEndian.AppendUint16(o, 9)
		}
		o = append(o, b[12:14+40]...)
		ip := o[len(o)-40:]
		ip[6] = 0 // hop-by-hop
		binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(ip[4:])+16)
		o = append(o, 60, 0, 1, 4, 0, 0, 0, 0) // next: destination options
		o = append(o, 17, 0, 1, 4, 0, 0, 0, 0) // next: UDP
		return append(o, b[14+40:]...)
	}
	other := append([]byte(nil), plain...)
	binary.BigEndian.PutUint16(other[14+40+2:], 53)
	r.send(r.netPeer, withExt(plain, nil), withExt(plain, []uint16{0x8100}), withExt(other, nil))
	out := r.recv(r.hostPeer)
	require.Len(t, out, 1, "only the DNS datagram passes")
	s := r.stage.Stats().ToHost
	require.Equal(t, roce.DirStats{Received: 3, Forwarded: 1, PassedOther: 1, DropUnsupported: 2}, s)
	r.send(r.hostPeer, withExt(plain, nil))
	require.Empty(t, r.recv(r.netPeer))
	require.Equal(t, uint64(1), r.stage.Stats().ToNet.DropUnsupported)
}
