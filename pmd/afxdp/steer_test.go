package afxdp

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/core/wire"
)

const steerPort = 4791

// cidFrame is a UDP/IPv4 datagram to steerPort whose transport header
// starts with version and cid.
func cidFrame(version, cid uint32) []byte {
	b := frameBuilder{etherType: unix.ETH_P_IP, proto: ipProtoUDP, dport: steerPort}.build()
	binary.BigEndian.PutUint32(b[ethHeaderLen+ipv4MinLen+udpHeaderLen:], version<<28|cid)
	return b
}

// TestProgramCountsMissteered runs the program (BPF_PROG_TEST_RUN, which
// presents every frame on rx queue 0) and checks that only well-formed
// datagrams whose CID names another shard are counted, and that every
// datagram to the port is still redirected.
func TestProgramCountsMissteered(t *testing.T) {
	skipUnlessRoot(t)
	p, err := loadProgram(4, steerPort, 2, false)
	require.NoError(t, err)
	defer p.Close()
	ipv6 := frameBuilder{etherType: unix.ETH_P_IPV6, proto: ipProtoUDP, dport: steerPort}.build()
	binary.BigEndian.PutUint32(ipv6[ethHeaderLen+ipv6HeaderLen+udpHeaderLen:], 1<<28|3<<22|7)
	for _, c := range []struct {
		name  string
		frame []byte
		miss  uint64
	}{
		{"shard 0 on queue 0", cidFrame(1, 0<<22|9), 0},
		{"shard 1 on queue 0", cidFrame(1, 1<<22|9), 1},
		{"shard 3 on queue 0", cidFrame(1, 3<<22|1), 1},
		{"shard 3 over IPv6", ipv6, 1},
		{"ConnOpen of shard 0 on queue 0", openFrame(t, 0<<22|5), 0},
		{"ConnOpen of shard 2 on queue 0", openFrame(t, 2<<22|5), 1},
		{"version 0", cidFrame(0, 3<<22|1), 0},
		{"no CID word", cidFrame(1, 3<<22|1)[:ethHeaderLen+ipv4MinLen+udpHeaderLen+3], 0},
	} {
		before := p.missteered(0)
		got, err := p.prog.Run(&ebpf.RunOptions{Data: c.frame})
		require.NoError(t, err, c.name)
		require.Equal(t, uint32(xdpPass), got, "%s: redirected to queue 0's slot, empty here, so the XDP_PASS fallback", c.name)
		require.Equal(t, c.miss, p.missteered(0)-before, c.name)
	}
}

// TestMissteeredOnVeth sends datagrams on transmit queue 0 of a two-queue
// veth (so they arrive on receive queue 0) with CIDs of shard 0 and shard 1
// of a two-shard transport: the shard-1 ones are counted on queue 0, exactly,
// and all of them are received on queue 0.
func TestMissteeredOnVeth(t *testing.T) {
	const queues, right, wrong = 2, 40, 25
	tp := topo(t, queues)
	pool := newPool(t, 8192, 2048)
	tx := openPort(t, pool, Options{Interface: tp.IfA, Namespace: tp.A, Queues: queues, RingSize: 512})
	rx := openPort(t, pool, Options{Interface: tp.IfB, Namespace: tp.B, Queues: queues, RingSize: 512, UDPPort: steerPort, ShardBits: 1})

	hs := make([]mbuf.Handle, right+wrong)
	require.Equal(t, len(hs), pool.AllocBulk(hs))
	for i, h := range hs {
		f := cidFrame(1, uint32(i)) // shard 0
		if i >= right {
			f = cidFrame(1, 1<<23|uint32(i)) // shard 1
		}
		copy(f[0:6], tp.MACB)
		copy(f[6:12], tp.MACA)
		require.True(t, pool.SetLen(h, len(f)))
		copy(pool.Data(h), f)
	}
	txAll(t, tx, 0, hs)

	got := [queues]int{}
	bufs := make([]mbuf.Handle, 64)
	for empty := 0; got[0] < len(hs) && empty < 1<<18; {
		n := 0
		for q := range queues {
			k := rx.RxBurst(q, bufs)
			n += k
			for _, h := range bufs[:k] {
				if b := pool.Data(h); len(b) >= 60 && binary.BigEndian.Uint16(b[ethHeaderLen+ipv4MinLen+2:]) == steerPort {
					got[q]++
				}
			}
			pool.Free(bufs[:k])
		}
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	require.Equal(t, [queues]int{len(hs), 0}, got, "every datagram is delivered on the queue it arrived on")
	require.Equal(t, []uint64{wrong, 0}, rx.Missteered(), "the shard-1 datagrams that arrived on queue 0, exactly")
	require.NoError(t, rx.Close())
	require.Equal(t, []uint64{wrong, 0}, rx.Missteered(), "after Close, the counts read at Close")
}

// openFrame is a ConnOpen to steerPort from source CID src, with a
// sealing key after the source CID.
func openFrame(t testing.TB, src uint32) []byte {
	return transportFrame(t, wire.Header{Type: wire.TypeConnOpen, Ext: wire.Ext{Present: wire.ExtSourceCID | wire.ExtSealKey, SourceCID: src}}, nil)
}

// transportFrame encodes a transport frame to steerPort.
func transportFrame(t testing.TB, h wire.Header, payload []byte) []byte {
	t.Helper()
	a := wire.Addrs{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, DstPort: steerPort,
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2")}
	h.Version = wire.Version
	b := make([]byte, 512)
	n, err := wire.EncodeFrame(b, &a, &h, payload)
	require.NoError(t, err)
	return b[:n]
}

// TestProgramOwnerAsCoreShard: the program counts a frame on queue 0
// exactly when core/shard's Owner gives it an owner other than shard 0 —
// destination CIDs, ConnOpens and early data (owned through the source
// CID, wherever it stands in the extension chain), and thousands of
// mutations of them (cut short, bytes of the header and the chain
// changed) — so a ConnOpen of another shard's opener is the only kind of
// CID-0 frame it counts.
func TestProgramOwnerAsCoreShard(t *testing.T) {
	skipUnlessRoot(t)
	require.Equal(t, shard.MaxOpenerExts, openerExts, "the program walks as many extensions as core/shard")
	const bits = 2
	p, err := loadProgram(4, steerPort, bits, false)
	require.NoError(t, err)
	defer p.Close()
	base := [][]byte{
		openFrame(t, 1<<22|3),
		openFrame(t, 0<<22|3),
		transportFrame(t, wire.Header{Type: wire.TypeConnOpen, Ext: wire.Ext{Present: wire.ExtSourceCID, SourceCID: 3<<22 | 1}}, nil),
		transportFrame(t, wire.Header{Type: wire.TypeSend, Desc: 1, Ext: wire.Ext{Present: wire.ExtPlacement | wire.ExtQPN | wire.ExtSourceCID,
			Placement: wire.Placement{Mode: wire.PlacementAbsolute, Index: 1}, DstQPN: 1, SrcQPN: 2, SourceCID: 2<<22 | 7}}, []byte{1, 2, 3}),
		transportFrame(t, wire.Header{Type: wire.TypePushUnsolicitedData, DestCID: 1<<22 | 4}, []byte{1}),
		transportFrame(t, wire.Header{Type: wire.TypeAck, Ext: wire.Ext{Present: wire.ExtSourceCID, SourceCID: 1 << 22}}, nil),
		transportFrame(t, wire.Header{Type: wire.TypeNack, DestCID: 3 << 22, Nack: wire.NackBody{Code: wire.NackBadCID, Window: wire.WindowRequest}}, nil),
	}
	r := rand.New(rand.NewPCG(1, 2))
	frames := append([][]byte(nil), base...)
	for range 3000 {
		b := append([]byte(nil), base[r.IntN(len(base))]...)
		hdr := ethHeaderLen + ipv4MinLen + udpHeaderLen
		set := func(i int, v byte) { // a byte of the frame, if it still has it
			if i < len(b) {
				b[i] = v
			}
		}
		for range 1 + r.IntN(3) {
			switch r.IntN(5) {
			case 0:
				b = b[:hdr+r.IntN(len(b)-hdr+1)]
			case 1:
				set(hdr+1+r.IntN(3), 0) // toward a CID 0 with an extension chain it was not built with
			case 2:
				set(hdr+4, byte(r.IntN(16))) // type
			case 3:
				set(hdr+7, byte(r.IntN(12))) // extension words
			default:
				if k := hdr + wire.BaseHeaderLen; len(b) > k {
					b[k+r.IntN(len(b)-k)] = byte(r.IntN(9)) // a TLV type, length or field
				}
			}
		}
		frames = append(frames, b)
	}
	counted := 0
	for i, b := range frames {
		before := p.missteered(0)
		_, err := p.prog.Run(&ebpf.RunOptions{Data: b})
		require.NoError(t, err)
		j, ok := shard.Owner(b, bits, 1<<bits)
		want := uint64(0)
		if ok && j != 0 {
			want = 1
		}
		require.Equal(t, want, p.missteered(0)-before, "frame %d (%x): core/shard's owner %d (ok %v)", i, b, j, ok)
		counted += int(want)
	}
	require.Greater(t, counted, 100, "the mutations left many frames with an owner")
}
