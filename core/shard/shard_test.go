package shard_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/shard"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/pmd/mem"
)

// frame puts in a new frame of pool a transport packet for destination
// CID cid whose payload's first byte is tag.
func frame(t *testing.T, pool *mbuf.Pool, cid uint32, tag byte) mbuf.Handle {
	t.Helper()
	return put(t, pool, encode(t, wire.Header{Type: wire.TypePushUnsolicitedData, DestCID: cid}, []byte{tag, 1, 2, 3}))
}

// put copies b into a new frame of pool.
func put(t testing.TB, pool *mbuf.Pool, b []byte) mbuf.Handle {
	t.Helper()
	hs := make([]mbuf.Handle, 1)
	require.Equal(t, 1, pool.AllocBulk(hs))
	require.True(t, pool.SetLen(hs[0], len(b)))
	copy(pool.Data(hs[0]), b)
	return hs[0]
}

// newSet splits one end (dev) of a mem pair of n queues among n shards
// with hand-off rings of ring slots (0: the default); peer is the other
// end, and frames the pool's size.
func newSet(t *testing.T, n, ring, frames int) (set *shard.Set, pool *mbuf.Pool, dev, peer port.Port) {
	t.Helper()
	pool, err := mbuf.New(mbuf.Options{Name: t.Name(), Frames: frames})
	require.NoError(t, err)
	dev, peer, err = mem.NewPair(pool, mem.PairOptions{Name: t.Name(), Queues: n})
	require.NoError(t, err)
	set, err = shard.New(dev, pool, n, ring)
	require.NoError(t, err)
	return set, pool, dev, peer
}

// closeAll closes the set, the ports and the pool, which must have every
// frame back.
func closeAll(t *testing.T, set *shard.Set, pool *mbuf.Pool, ports ...port.Port) {
	t.Helper()
	require.NoError(t, set.Close())
	for _, p := range ports {
		require.NoError(t, p.Close())
	}
	require.Zero(t, pool.InUse(), "every frame is back in the pool")
	require.NoError(t, pool.Close())
}

// cidOf is a CID of shard j of 1<<bits.
func cidOf(j int, bits uint, slot uint32) uint32 { return uint32(j)<<(24-bits) | slot }

// TestHandOff: frames for every shard sent on every queue of a 4-queue
// port reach exactly the shard their CID names, once each, whichever queue
// they arrived on; those on a wrong queue are counted out and in, CID 0
// stays where it lands, a full ring drops and counts, and nothing leaks.
func TestHandOff(t *testing.T) {
	const n = 4
	set, pool, dev, peer := newSet(t, n, 0, 4096)
	bits := set.Bits()
	require.Equal(t, uint(2), bits)

	// Every (arrival queue, owner shard) pair, three frames each, plus a
	// ConnOpen (CID 0) per queue.
	type sent struct{ q, owner int }
	want := map[byte]sent{}
	tag := byte(0)
	for q := range n {
		var hs []mbuf.Handle
		for j := range n {
			for range 3 {
				hs = append(hs, frame(t, pool, cidOf(j, bits, uint32(q+1)), tag))
				want[tag] = sent{q, j}
				tag++
			}
		}
		hs = append(hs, frame(t, pool, 0, tag))
		want[tag] = sent{q, q}
		tag++
		require.Equal(t, len(hs), peer.TxBurst(q, hs))
	}
	got := map[byte]int{}
	buf := make([]mbuf.Handle, 8) // smaller than a queue's backlog: several bursts
	for range 4 {                 // hand-offs land on a later poll of their owner
		for i := range n {
			p := set.Port(i)
			for m := p.RxBurst(i, buf); m > 0; m = p.RxBurst(i, buf) {
				for _, h := range buf[:m] {
					d := pool.Data(h)
					l4, ok := wire.L4Offset(d)
					require.True(t, ok)
					var f wire.Frame
					require.NoError(t, f.Decode(d))
					tg := f.Payload[0]
					require.Equal(t, want[tg].owner, i, "frame %d (CID %#x) reached shard %d", tg, f.Header.DestCID, i)
					cid, _ := wire.PeekCID(d, l4)
					if cid != 0 {
						require.Equal(t, i, rt.CIDShard(cid, bits))
					}
					got[tg]++
				}
				pool.Free(buf[:m])
			}
		}
	}
	require.Len(t, got, len(want), "every frame arrived")
	for tg, c := range got {
		require.Equal(t, 1, c, "frame %d delivered once", tg)
	}
	tot := set.Total()
	// Per queue: 3 frames of each of the 3 other shards moved.
	require.Equal(t, uint64(n*3*(n-1)), tot.SteeredOut)
	require.Equal(t, tot.SteeredOut, tot.SteeredIn)
	require.Equal(t, uint64(len(want)), tot.Received)
	require.Zero(t, tot.HandoffDropped)
	for i := range n {
		st := set.Stats(i)
		require.Equal(t, uint64(3*(n-1)), st.SteeredOut, "shard %d", i)
		require.Equal(t, uint64(3*(n-1)), st.SteeredIn, "shard %d", i)
	}
	require.InDelta(t, float64(n*3*(n-1))/float64(len(want)), tot.SteeredFraction(), 1e-9)
	closeAll(t, set, pool, dev, peer)
}

// TestHandOffRingFull: frames for a shard whose ring is full are freed and
// counted, the rest handed over; Close frees what the rings still hold.
func TestHandOffRingFull(t *testing.T) {
	set, pool, dev, peer := newSet(t, 2, 4, 1024)
	var hs []mbuf.Handle
	for k := range 10 {
		hs = append(hs, frame(t, pool, cidOf(1, set.Bits(), 1), byte(k)))
	}
	require.Equal(t, len(hs), peer.TxBurst(0, hs))
	buf := make([]mbuf.Handle, 32)
	require.Zero(t, set.Port(0).RxBurst(0, buf), "shard 0 keeps none of shard 1's frames")
	st := set.Stats(0)
	require.Equal(t, shard.Stats{Received: 10, SteeredOut: 4, HandoffDropped: 6}, st)
	require.InDelta(t, 1.0, st.SteeredFraction(), 1e-9)
	// Shard 1 never polls: Close frees the ring's frames.
	closeAll(t, set, pool, dev, peer)
}
