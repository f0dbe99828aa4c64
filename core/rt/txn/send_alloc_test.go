package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// TestSendSteadyStateAllocatesNothing posts receive WQEs and Sends (one
// packet, several, index in the header and in the extension, the baseline
// holding a packet) and completes them at both ends: no heap allocation
// once warm.
func TestSendSteadyStateAllocatesNothing(t *testing.T) {
	for _, cfg := range []dix.Config{
		{Kind: dix.FreeRunning, Width: 16},
		{Kind: dix.Relative, Width: 8, Where: dix.InExtension, Carry: dix.CarryUntilAcked},
		{},
	} {
		t.Run(cfg.Kind.String(), func(t *testing.T) {
			sp := newSendPair(t, 12, "paths=2,spread=20us", func(a, b *Options) {
				a.Segment, b.Segment = 1024, 1024
				b.HoldBytes = 64 << 10
			})
			c := sp.open(cfg)
			src := pattern(1, 8<<10)
			ra, _ := sp.a.Register(src, 0)
			rb, _ := sp.b.Register(make([]byte, 16<<10), RemoteWrite)
			cq := make([]Completion, 8)
			one := func(n int) {
				_, err := sp.cb.PostRecv(RecvWR{Local: rb, Len: 8 << 10})
				require.NoError(t, err)
				_, err = c.Send(Op{Local: ra, Len: n})
				require.NoError(t, err)
				for ga, gb := 0, 0; ga == 0 || gb == 0; {
					now := sp.clk.Now()
					w := sp.a.Poll(now) + sp.fab.Poll(now) + sp.b.Poll(now)
					na, nb := sp.a.Completions(cq), sp.b.Completions(cq[4:])
					ga, gb = ga+na, gb+nb
					if w == 0 && na == 0 && nb == 0 {
						sp.clk.Advance(time.Microsecond)
					}
				}
			}
			cycle := func() { one(500); one(6000) }
			for range 20 {
				cycle()
			}
			allocs := testing.AllocsPerRun(50, cycle)
			require.Zero(t, allocs, "allocations per Send cycle")
		})
	}
}

// TestSendForgedIndexesNeverWriteElsewhere hands the receiver Send packets
// whose index names a WQE already consumed, one bound to another Send,
// one not posted, one beyond the queue, and a malformed descriptor: each
// is counted, refused or dropped, and no WQE's bytes change.
func TestSendForgedIndexesNeverWriteElsewhere(t *testing.T) {
	sp := newSendPair(t, 13, "", func(a, b *Options) { b.RecvDepth = 8 })
	c := sp.open(dix.Config{Kind: dix.FreeRunning, Width: 16})
	src := pattern(2, 4096)
	ra, _ := sp.a.Register(src, 0)
	mem := make([]byte, 4*1024)
	rb, _ := sp.b.Register(mem, RemoteWrite)
	for k := range 4 {
		_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * 1024), Len: 1024, WRID: uint64(k)})
		require.NoError(t, err)
	}
	// WQE 0 consumed by a real Send; WQE 1 bound to a real Send in progress.
	_, err := c.Send(Op{Local: ra, Len: 100})
	require.NoError(t, err)
	sp.run(func() bool { return len(sp.recvs()) == 1 }, 10*time.Millisecond)
	rc := sp.cb.Transport()
	desc := uint8((&dix.Config{Kind: dix.FreeRunning, Width: 16}).Desc(false))
	send := func(ssn, rsn, reqLen, off uint32, payload []byte) {
		h := wire.Header{Version: wire.Version, Type: wire.TypeSend, Desc: desc, SSN: ssn, RSN: rsn, ReqLen: reqLen, Offset: off, PayloadLen: uint16(len(payload))}
		sp.b.deliver(rc, &h, payload)
	}
	junk := make([]byte, 64)
	for i := range junk {
		junk[i] = 0xee
	}
	send(1, 500, 1000, 0, junk) // binds WQE 1 to RSN 500 (as a real first packet would)
	before := append([]byte(nil), mem...)
	st0 := sp.b.SendStats()
	send(0, 501, 100, 0, junk)     // WQE 0: consumed already
	send(1, 502, 1000, 64, junk)   // WQE 1: bound to another Send
	send(9, 503, 100, 0, junk)     // beyond the 8-slot queue
	send(5, 504, 100, 0, junk)     // not posted
	send(2, 505, 100, 0, junk[:0]) // empty packet of a 100-byte Send at WQE 2: binds, writes nothing
	h := wire.Header{Version: wire.Version, Type: wire.TypeSend, Desc: 0xc0, SSN: 3, RSN: 506, ReqLen: 64, PayloadLen: 64}
	sp.b.deliver(rc, &h, junk) // a descriptor no sender produces
	sp.b.publish()
	st := sp.b.SendStats()
	require.Equal(t, st0.Stale+1, st.Stale, "consumed WQE")
	require.Equal(t, st0.Forged+2, st.Forged, "another Send's WQE, bad descriptor")
	require.Equal(t, st0.Beyond+1, st.Beyond)
	require.Equal(t, st0.RNRSent+1, st.RNRSent, "not posted: refused for now")
	require.Equal(t, before, mem, "no WQE changed")
}

// TestBaselineHoldsThenPlacesAndRefusesTooLong drives the baseline
// receiver packet by packet: a later Send's packet is held until the head
// Send is placed, then copied into its WQE; a Send longer than its WQE is
// refused at once, even while it waits its turn, and its WQE completes in
// error.
func TestBaselineHoldsThenPlacesAndRefusesTooLong(t *testing.T) {
	sp := newSendPair(t, 14, "", func(a, b *Options) { b.HoldBytes = 16 << 10 })
	sp.open(dix.Config{})
	mem := make([]byte, 3*1024)
	rb, _ := sp.b.Register(mem, RemoteWrite)
	for k := range 3 {
		size := 1024
		if k == 2 {
			size = 100
		}
		_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * 1024), Len: size, WRID: uint64(k)})
		require.NoError(t, err)
	}
	rc := sp.cb.Transport()
	send := func(k, rsn, reqLen, off uint32, payload []byte) rt.Verdict {
		h := wire.Header{Version: wire.Version, Type: wire.TypeSend, SSN: k, RSN: rsn, ReqLen: reqLen, Offset: off, PayloadLen: uint16(len(payload))}
		return sp.b.deliver(rc, &h, payload)
	}
	one, two := pattern(1, 600), pattern(2, 600)
	require.Equal(t, rt.Accept, send(1, 11, 600, 0, two[:300]), "Send 1 before its turn: held")
	require.Equal(t, rt.ULPErrorCode(uint8(RefusalRecvTooSmall)), send(2, 12, 600, 0, two[:300]), "Send 2 is longer than WQE 2")
	require.Equal(t, rt.Accept, send(0, 10, 600, 300, one[300:]))
	sp.b.publish()
	require.Equal(t, uint64(1), sp.b.SendStats().Held)
	require.Equal(t, rt.Accept, send(0, 10, 600, 0, one[:300]), "Send 0 whole: placed, then Send 1's held packet")
	require.Equal(t, rt.Accept, send(1, 11, 600, 300, two[300:]))
	sp.b.publish()
	st := sp.b.SendStats()
	require.Equal(t, uint64(1), st.PlacedHeld)
	require.Zero(t, st.HeldBytes)
	require.Equal(t, one, mem[:600])
	require.Equal(t, two, mem[1024:1624])
	n := sp.b.Completions(sp.buf)
	got := map[uint32]Status{}
	for _, c := range sp.buf[:n] {
		got[c.WQE] = c.Status
	}
	require.Equal(t, map[uint32]Status{0: StatusOK, 1: StatusOK, 2: StatusLocalLength}, got)
}
