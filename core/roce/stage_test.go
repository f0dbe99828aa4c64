package roce_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/qpx"
	"github.com/peregrine-net/peregrine/core/roce"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// rig is a stage between two mem pairs: the test sends on netPeer (the
// network) and hostPeer (the host) and reads what comes out of the other.
type rig struct {
	t                 testing.TB
	pool              *mbuf.Pool
	netPeer, hostPeer port.Port
	stage             *roce.Stage
	tb                *qpx.Table
}

func newRig(t testing.TB, o roce.Options) *rig {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: "roce-test", Frames: 4096})
	require.NoError(t, err)
	netPeer, net, err := mem.NewPair(pool, mem.PairOptions{Name: "net"})
	require.NoError(t, err)
	host, hostPeer, err := mem.NewPair(pool, mem.PairOptions{Name: "host"})
	require.NoError(t, err)
	if o.Table == nil {
		o.Table, err = qpx.New(qpx.Options{Slots: 8})
		require.NoError(t, err)
	}
	o.Net, o.Host, o.Pool = net, host, pool
	s, err := roce.New(o)
	require.NoError(t, err)
	r := &rig{t: t, pool: pool, netPeer: netPeer, hostPeer: hostPeer, stage: s, tb: o.Table}
	t.Cleanup(func() {
		s.Stop(0)
		for _, p := range []port.Port{netPeer, net, host, hostPeer} {
			require.NoError(t, p.Close())
		}
		require.NoError(t, pool.CheckLeaks())
		require.NoError(t, pool.Close())
	})
	return r
}

func addrs4() wire.Addrs {
	return wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("198.18.0.1"), DstIP: netip.MustParseAddr("198.18.0.2"),
		SrcPort: 49152, DstPort: wire.RoCEv2Port, NoUDPChecksum: true, TOS: 0x02, TTL: 64,
	}
}

func addrs6() wire.Addrs {
	return wire.Addrs{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("fd00::1"), DstIP: netip.MustParseAddr("fd00::2"),
		SrcPort: 49152, DstPort: wire.RoCEv2Port, FlowLabel: 0x12345, TTL: 64,
	}
}

func build(t testing.TB, f roce.FrameSpec) []byte {
	t.Helper()
	b := make([]byte, 2048)
	n, err := f.Encode(b)
	require.NoError(t, err)
	return b[:n]
}

// send puts frames on p.
func (r *rig) send(p port.Port, frames ...[]byte) {
	r.t.Helper()
	hs := make([]mbuf.Handle, len(frames))
	require.Equal(r.t, len(frames), r.pool.AllocBulk(hs))
	for i, f := range frames {
		require.True(r.t, r.pool.SetLen(hs[i], len(f)))
		copy(r.pool.Data(hs[i]), f)
	}
	require.Equal(r.t, len(frames), p.TxBurst(0, hs))
}

// recv polls the stage and drains p.
func (r *rig) recv(p port.Port) [][]byte {
	r.t.Helper()
	r.stage.Poll(0)
	var out [][]byte
	hs := make([]mbuf.Handle, 64)
	for {
		n := p.RxBurst(0, hs)
		if n == 0 {
			return out
		}
		for _, h := range hs[:n] {
			out = append(out, append([]byte(nil), r.pool.Data(h)...))
		}
		r.pool.Free(hs[:n])
	}
}

func TestToHostTranslatesChecksAndRewrites(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		r := newRig(t, roce.Options{})
		q, local, err := r.tb.Open(qpx.Context{DestQPN: 0x4242, ExpectedPSN: 100, Access: qpx.AccessRemoteWrite})
		require.NoError(t, err)
		a := addrs4()
		if v6 {
			a = addrs6()
		}
		payload := []byte("0123456789abcdef")
		in := build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x0a, PKey: 0xffff, DestQP: q, PSN: 100, AckReq: true, FECN: true},
			RETH: wire.RETH{VA: 0x1000, RKey: 7, DMALen: 16}, Payload: payload})
		r.send(r.netPeer, in)
		out := r.recv(r.hostPeer)
		require.Len(t, out, 1)
		f, err := wire.DecodeRoCEFrame(out[0])
		require.NoError(t, err, "the rewritten frame's ICRC (and UDP checksum) must be right")
		require.Equal(t, uint32(local), f.BTH.DestQP, "global QPN → local number")
		require.Equal(t, uint32(100), f.BTH.PSN)
		require.True(t, f.BTH.FECN, "FECN survives")
		reth, err := wire.DecodeRETH(f.Payload)
		require.NoError(t, err)
		require.Equal(t, uint32(7), reth.RKey)
		require.Equal(t, uint32(101), r.tb.Context(local).ExpectedPSN)
		s := r.stage.Stats()
		require.Equal(t, uint64(1), s.ToHost.Forwarded)
		require.Zero(t, s.ToHost.Dropped())
		require.Equal(t, uint64(1), s.QPX.Translated)
	}
}

func TestToHostDropsByReason(t *testing.T) {
	r := newRig(t, roce.Options{})
	live, local, err := r.tb.Open(qpx.Context{ExpectedPSN: 5, Access: qpx.AccessRemoteRead})
	require.NoError(t, err)
	stale, _, err := r.tb.Open(qpx.Context{})
	require.NoError(t, err)
	require.NoError(t, r.tb.Close(stale))
	a := addrs4()
	frame := func(op uint8, qp, psn uint32) []byte {
		return build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: op, PKey: 0xffff, DestQP: qp, PSN: psn}, Payload: make([]byte, 8)})
	}
	badICRC := frame(0x04, live, 5)
	badICRC[len(badICRC)-1] ^= 1
	malformed := frame(0x04, live, 5)
	malformed[wire.EthHeaderLen+wire.IPv4HeaderLen+wire.UDPHeaderLen] = 0x1f // RC opcode 31: undefined
	other := frame(0x04, live, 5)
	other[wire.EthHeaderLen+wire.IPv4HeaderLen+3] = 0x99 // another UDP port: not RoCE
	r.send(r.netPeer,
		frame(0x04, stale, 5),    // retired: a stale packet
		frame(0x04, 0x777777, 5), // never handed out
		badICRC,
		malformed,
		frame(0x0a, live, 5), // RDMA WRITE: the QP grants read only
		frame(0x04, live, 5), // in order
		frame(0x04, live, 9), // ahead: out of sequence, passed
		frame(0x04, live, 7), // behind: duplicate, passed
		frame(0x11, live, 1), // an ACK: a response, its PSN not checked
		other,
	)
	out := r.recv(r.hostPeer)
	require.Len(t, out, 5)
	s := r.stage.Stats().ToHost
	require.Equal(t, roce.DirStats{Received: 10, Forwarded: 5, PassedOther: 1, DropMalformed: 1, DropICRC: 1,
		DropRetired: 1, DropUnknown: 1, DropAccess: 1, OutOfSequence: 1, Duplicate: 1}, s)
	require.Equal(t, uint32(10), r.tb.Context(local).ExpectedPSN)
	q := r.stage.Stats().QPX
	require.Equal(t, uint64(1), q.DropRetired)
	require.Equal(t, uint64(1), q.DropUnknown)
}

func TestStrictPSNAndReadSpan(t *testing.T) {
	r := newRig(t, roce.Options{StrictPSN: true, PMTU: 1024})
	q, local, err := r.tb.Open(qpx.Context{ExpectedPSN: 0, Access: qpx.AccessAll})
	require.NoError(t, err)
	a := addrs4()
	read := build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x0c, PKey: 0xffff, DestQP: q, PSN: 0},
		RETH: wire.RETH{VA: 1, RKey: 2, DMALen: 3000}})
	next := build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: q, PSN: 3}})
	gap := build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: q, PSN: 9}})
	r.send(r.netPeer, read, next, gap)
	out := r.recv(r.hostPeer)
	require.Len(t, out, 2, "a 3000-byte READ occupies PSNs 0..2; PSN 9 is out of sequence and dropped")
	s := r.stage.Stats().ToHost
	require.Equal(t, uint64(1), s.OutOfSequence)
	require.Equal(t, uint64(1), s.DropStrictPSN)
	require.Equal(t, uint32(4), r.tb.Context(local).ExpectedPSN, "a PSN dropped out of sequence moves nothing")
}

func TestToNetBuildsFromContext(t *testing.T) {
	r := newRig(t, roce.Options{})
	_, local, err := r.tb.Open(qpx.Context{DestQPN: 0xabcdef, PKey: 0x8001, NextPSN: 50})
	require.NoError(t, err)
	a := addrs6()
	in := build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: uint32(local), PSN: 50}, Payload: []byte("abcd")})
	free := build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: 7, PSN: 50}})
	r.send(r.hostPeer, in, free)
	out := r.recv(r.netPeer)
	require.Len(t, out, 1)
	f, err := wire.DecodeRoCEFrame(out[0])
	require.NoError(t, err)
	require.Equal(t, uint32(0xabcdef), f.BTH.DestQP, "local number → the peer's global QPN")
	require.Equal(t, uint16(0x8001), f.BTH.PKey)
	require.Equal(t, uint32(51), r.tb.Context(local).NextPSN)
	s := r.stage.Stats().ToNet
	require.Equal(t, uint64(1), s.DropUnknown, "local context 7 holds no QP")
}

func TestOptionsRefused(t *testing.T) {
	pool, err := mbuf.New(mbuf.Options{Name: "o", Frames: 1024})
	require.NoError(t, err)
	defer pool.Close()
	a, b, err := mem.NewPair(pool, mem.PairOptions{})
	require.NoError(t, err)
	defer a.Close()
	defer b.Close()
	tb, err := qpx.New(qpx.Options{})
	require.NoError(t, err)
	for _, o := range []roce.Options{
		{},
		{Net: a, Host: b, Pool: pool, Table: tb, Burst: 300},
		{Net: a, Host: b, Pool: pool, Table: tb, PMTU: 1000},
		{Net: a, Host: b, Pool: pool, Table: tb, HostQueue: 3},
	} {
		_, err := roce.New(o)
		require.Error(t, err)
		require.Contains(t, err.Error(), "Options.")
	}
}

func TestNoAllocationsPerPacket(t *testing.T) {
	r := newRig(t, roce.Options{})
	q, local, err := r.tb.Open(qpx.Context{DestQPN: 9, Access: qpx.AccessAll})
	require.NoError(t, err)
	a := addrs4()
	const runs = 600
	var toHost, toNet [][]byte
	for psn := range uint32(runs) {
		toHost = append(toHost, build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: q, PSN: psn}, Payload: make([]byte, 64)}))
		toNet = append(toNet, build(t, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x04, PKey: 0xffff, DestQP: uint32(local), PSN: psn}, Payload: make([]byte, 64)}))
	}
	in := make([]mbuf.Handle, 1)
	out := make([]mbuf.Handle, 4)
	put := func(p port.Port, f []byte) {
		r.pool.AllocBulk(in)
		r.pool.SetLen(in[0], len(f))
		copy(r.pool.Data(in[0]), f)
		p.TxBurst(0, in)
	}
	i := 0
	allocs := testing.AllocsPerRun(runs-10, func() {
		put(r.netPeer, toHost[i])
		put(r.hostPeer, toNet[i])
		r.stage.Poll(0)
		n := r.hostPeer.RxBurst(0, out)
		n += r.netPeer.RxBurst(0, out[n:])
		r.pool.Free(out[:n])
		i++
	})
	require.Zero(t, allocs)
	s := r.stage.Stats()
	require.Zero(t, s.ToHost.Dropped()+s.ToNet.Dropped(), "%v / %v", s.ToHost, s.ToNet)
}

// FuzzStage feeds arbitrary frames to both sides (seeds in every form
// the stage locates: VLAN tags, QinQ, IPv4 options): no panic, every
// frame taken is either forwarded or dropped under a reason, and every
// RoCEv2 frame that reaches the host names the local QP.
func FuzzStage(f *testing.F) {
	a := addrs4()
	for _, op := range []uint8{0x04, 0x0a, 0x0c, 0x11, 0x64, 0x81} {
		f.Add(build(f, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: op, PKey: 0xffff, DestQP: qpx.FirstQPN, PSN: 1},
			RETH: wire.RETH{DMALen: 5000}, Payload: make([]byte, 24)}), true)
		f.Add(build(f, roce.FrameSpec{Addrs: addrs6(), BTH: wire.BTH{Opcode: op, PKey: 0xffff, DestQP: 0, PSN: 1},
			Payload: make([]byte, 8)}), false)
	}
	for _, form := range forms {
		a := addrs4()
		if form.v6 {
			a = addrs6()
		}
		f.Add(shape(f, build(f, roce.FrameSpec{Addrs: a, BTH: wire.BTH{Opcode: 0x0a, PKey: 0xffff, DestQP: qpx.FirstQPN, PSN: 1},
			RETH: wire.RETH{DMALen: 16}, Payload: make([]byte, 16)}), form), true)
	}
	f.Add([]byte{1, 2, 3}, true)
	// One rig for every input: a pool and ports per input would make the
	// fuzzer crawl. Each input's counters are the difference.
	r := newRig(f, roce.Options{})
	_, local, err := r.tb.Open(qpx.Context{Access: qpx.AccessAll})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, frame []byte, toHost bool) {
		if len(frame) == 0 || len(frame) > 1500 {
			return
		}
		r.t = t
		in, out := r.netPeer, r.hostPeer
		if !toHost {
			in, out = r.hostPeer, r.netPeer
		}
		pick := func(s roce.Stats) roce.DirStats {
			if toHost {
				return s.ToHost
			}
			return s.ToNet
		}
		before := pick(r.stage.Stats())
		r.send(in, frame, frame)
		got := r.recv(out)
		d := pick(r.stage.Stats())
		require.Equal(t, uint64(2), d.Received-before.Received)
		require.Equal(t, d.Received, d.Forwarded+d.Dropped(), "%v", d)
		require.Len(t, got, int(d.Forwarded-before.Forwarded))
		for _, g := range got {
			var v wire.RoCEView
			if wire.ParseRoCE(g, wire.RoCEv2Port, &v) == nil {
				require.True(t, v.CheckICRC(g), "every RoCEv2 frame emitted carries a right ICRC")
				if toHost {
					require.Equal(t, uint32(local), v.DestQP, "no RoCEv2 frame reaches the host untranslated")
				}
			}
		}
	})
}
