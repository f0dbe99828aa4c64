package txn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/dix"
	"github.com/peregrine-net/peregrine/core/ioi"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// Open checks every option before anything opens, in either mode (Early
// or not): a bad one is an error that leaves no transport connection, no
// taken slot and nothing on the wire.
func TestOpenChecksEveryOptionFirst(t *testing.T) {
	bad := map[string]ConnOptions{
		"OpTimeout": {OpTimeout: -time.Second},
		"IOI":       {IOI: &ioi.Config{Threshold: -1}},
		"Index":     {Index: dix.Config{Kind: dix.Absolute, Depth: 3}},
		"Weight":    {Weight: sched.MaxWeight + 1},
		"Weight<0":  {Weight: -1},
	}
	for name, opts := range bad {
		for _, early := range []bool{false, true} {
			p := newPair(t, 3, "", nil)
			opts.Early = early
			c, err := p.a.Open(p.peerB(), opts)
			require.Error(t, err, "%s early=%v", name, early)
			require.Nil(t, c)
			p.runFor(func() bool { return false }, 10*time.Millisecond)
			require.Zero(t, p.a.Transport().Conns(), "%s early=%v: a transport connection was left open", name, early)
			require.Zero(t, p.b.Transport().Conns(), "%s early=%v: the target heard of it", name, early)
			require.Zero(t, p.a.Transport().Stats().ConnOpened, "%s early=%v", name, early)
			require.Len(t, p.a.freeCon, len(p.a.conns), "%s early=%v: a slot stayed taken", name, early)
		}
	}
}

// Open in its Early mode honours the Index option as without it: Sends announce an
// absolute index the target's receive queue cannot decode, and are
// refused for it (an index ignored would have them land as baseline
// Sends).
func TestOpenEarlyModeTakesIndex(t *testing.T) {
	sp := newSendPair(t, 4, "", func(a, b *Options) { b.RecvDepth = 128 })
	c, err := sp.a.Open(sp.peerB(), ConnOptions{Early: true, Index: dix.Config{Kind: dix.Absolute, Width: 16, Depth: 64, Where: dix.InExtension}})
	require.NoError(t, err)
	src := pattern(1, 512)
	ra, err := sp.a.Register(src, 0)
	require.NoError(t, err)
	sp.run(func() bool { return sp.cb != nil }, 100*time.Millisecond)
	dst := make([]byte, 512)
	rb, err := sp.b.Register(dst, RemoteWrite)
	require.NoError(t, err)
	_, err = sp.cb.PostRecv(RecvWR{Local: rb, Len: 512})
	require.NoError(t, err)
	_, err = c.Send(Op{Local: ra, Len: 512})
	require.NoError(t, err)
	sp.run(func() bool { return len(sp.cqA) == 1 }, time.Second)
	require.Equal(t, StatusRemoteInvalid, sp.cqA[0].Status)
	require.Equal(t, RefusalIndexMismatch, sp.cqA[0].Refusal)
	require.Positive(t, sp.b.SendStats().IndexMismatch)
}

// A slot that served one connection starts the next one's Sends afresh,
// whichever call opened it (Open, OpenEarly, or the peer's accept): the
// second connection's first Send carries index 0 and lands in its first
// WQE.
func TestReusedSlotStartsSendsAfresh(t *testing.T) {
	idx := dix.Config{Kind: dix.FreeRunning, Width: 8}
	for _, early := range []bool{false, true} {
		sp := newSendPair(t, 5, "", nil)
		src := pattern(2, 4096)
		ra, err := sp.a.Register(src, 0)
		require.NoError(t, err)
		dst := make([]byte, 8*4096)
		rb, err := sp.b.Register(dst, RemoteWrite)
		require.NoError(t, err)
		round := func(open func(rt.PeerAddr, ConnOptions) (*Conn, error), n int) *Conn {
			sp.cb = nil
			c, err := open(sp.peerB(), ConnOptions{Index: idx})
			require.NoError(t, err)
			sp.run(func() bool { return sp.cb != nil && c.Transport().State() == rt.StateEstablished }, 100*time.Millisecond)
			for k := range n {
				_, err := sp.cb.PostRecv(RecvWR{Local: rb, LocalAddr: uint64(k * 4096), Len: 4096})
				require.NoError(t, err)
			}
			sp.cqA, sp.cqB = nil, nil
			for k := range n {
				_, err := c.Send(Op{Local: ra, LocalAddr: uint64(k * 512), Len: 512})
				require.NoError(t, err)
			}
			sp.run(func() bool { return len(sp.cqA) == n && len(sp.recvs()) == n }, time.Second)
			for _, cp := range append(sp.cqA, sp.recvs()...) {
				require.Equal(t, StatusOK, cp.Status, "early=%v", early)
			}
			return c
		}
		c := round(sp.a.Open, 3)
		require.NoError(t, c.Close())
		sp.run(func() bool { return sp.a.Transport().Conns() == 0 && sp.b.Transport().Conns() == 0 }, time.Second)
		open := sp.a.Open
		if early {
			open = sp.a.OpenEarly
		}
		round(open, 2)
	}
}

// The side that accepted a connection can Send on it at once, on a slot
// never used before as on a reused one.
func TestAcceptedSideSends(t *testing.T) {
	sp := newSendPair(t, 6, "", nil)
	c := sp.open(dix.Config{})
	src := pattern(3, 1024)
	rb, err := sp.b.Register(src, 0)
	require.NoError(t, err)
	dst := make([]byte, 1024)
	ra, err := sp.a.Register(dst, RemoteWrite)
	require.NoError(t, err)
	_, err = c.PostRecv(RecvWR{Local: ra, Len: 1024})
	require.NoError(t, err)
	_, err = sp.cb.Send(Op{Local: rb, Len: 1024})
	require.NoError(t, err)
	sp.run(func() bool { return len(sp.cqB) == 1 }, time.Second)
	require.Equal(t, StatusOK, sp.cqB[0].Status)
	require.Equal(t, src, dst)
}

// Early is 0-RTT: a push posted right after Open goes out in the endpoint's
// first Poll, before the ConnAccept could have come back; without it the
// push waits for the connection to be established.
func TestOpenEarlySendsBeforeAccept(t *testing.T) {
	for _, early := range []bool{false, true} {
		p := newPair(t, 7, "", nil)
		src := pattern(4, 512)
		ra, err := p.a.Register(src, 0)
		require.NoError(t, err)
		dst := make([]byte, 512)
		rb, err := p.b.Register(dst, RemoteWrite)
		require.NoError(t, err)
		c, err := p.a.Open(p.peerB(), ConnOptions{Early: early})
		require.NoError(t, err)
		_, err = c.Push(Op{Local: ra, Len: 512, Remote: wire.RegionRef{Key: rb.Key}})
		require.NoError(t, err)
		p.a.Poll(p.clk.Now()) // the peer has seen nothing yet
		require.Equal(t, rt.StateOpening, c.Transport().State(), "early=%v", early)
		if early {
			require.Positive(t, p.a.Transport().Stats().TxData, "the push waited for the accept")
		} else {
			require.Zero(t, p.a.Transport().Stats().TxData, "the push went before the accept")
		}
		p.run(func() bool { return len(p.cqA) == 1 }, time.Second)
		require.Equal(t, StatusOK, p.cqA[0].Status, "early=%v", early)
		require.Equal(t, src, dst, "early=%v", early)
	}
}
