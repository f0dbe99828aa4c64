package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// rawTap shows seen every frame transmitted, as bytes.
type rawTap struct {
	port.Port
	pool *mbuf.Pool
	seen func([]byte)
}

func (p *rawTap) TxBurst(q int, hs []mbuf.Handle) int {
	for _, h := range hs { // before the peer may own them (a refused one is seen again)
		p.seen(p.pool.Data(h))
	}
	return p.Port.TxBurst(q, hs)
}

// TestShardInCID: an endpoint that is shard k of 1<<ShardBits allocates
// CIDs naming k, and the receiver of a frame recovers k from the first
// word alone (wire.PeekCID, then CIDShard), every slot and generation.
func TestShardInCID(t *testing.T) {
	var toA, toB []int // the shard each frame's destination CID names
	h := newHarness(t, func(a, b *Options) { a.ShardBits, a.Shard = 2, 3; b.ShardBits, b.Shard = 2, 1 })
	tap := func(pt port.Port, got *[]int) port.Port {
		return &rawTap{Port: pt, seen: func(b []byte) {
			l4, ok := wire.L4Offset(b)
			require.True(t, ok)
			cid, ok := wire.PeekCID(b, l4)
			require.True(t, ok)
			if cid != 0 { // a ConnOpen names no connection yet
				*got = append(*got, CIDShard(cid, 2))
			}
		}, pool: h.pool}
	}
	h.pa.Port, h.pb.Port = tap(h.pa.Port, &toB), tap(h.pb.Port, &toA)
	for range 3 { // slots and generations move; the shard does not
		ca, cb := h.connect()
		require.Equal(t, 3, CIDShard(ca.LocalCID(), 2))
		require.Equal(t, 1, CIDShard(cb.LocalCID(), 2))
		h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 20, 100)
		h.run(func() bool { return len(h.gotB) >= 20 && h.quiet() }, time.Second)
		h.gotB = h.gotB[:0]
		require.NoError(t, ca.Close())
		h.run(h.quiet, time.Second)
		h.evB = h.evB[:0]
	}
	require.NotEmpty(t, toA)
	require.NotEmpty(t, toB)
	for _, s := range toA {
		require.Equal(t, 3, s)
	}
	for _, s := range toB {
		require.Equal(t, 1, s)
	}

	// Bad values name the field and the fix.
	base := Options{Port: h.pa, Pool: h.pool, Clock: h.clk, LocalIP: ipA}
	for _, tc := range []struct {
		mut  func(*Options)
		want string
	}{
		{func(o *Options) { o.ShardBits = 9 }, "Options.ShardBits 9 is out of range (use 0..8"},
		{func(o *Options) { o.ShardBits, o.Shard = 1, 2 }, "Options.Shard 2 is out of range for ShardBits 1 (use 0..1)"},
		{func(o *Options) { o.ShardBits, o.MaxConns = 4, 1<<20 }, "leaves 0 generation bits"},
	} {
		o := base
		tc.mut(&o)
		_, err := NewEndpoint(o)
		require.ErrorIs(t, err, ErrInvalidOptions)
		require.ErrorContains(t, err, tc.want)
	}
}
