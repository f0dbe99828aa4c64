package shard_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// hopper is an initiator's port that sends each copy of a ConnOpen on the
// next queue of the device (copy k on queue k mod queues), as an opener
// whose retransmission leaves by another queue (or meets another hash)
// than its first try; the rest goes out on the queue asked for. It
// receives from every queue, so the replies of whichever target shard
// answers reach the endpoint.
type hopper struct {
	port.Port
	pool  *mbuf.Pool
	opens int
}

func (h *hopper) TxBurst(queue int, bufs []mbuf.Handle) int {
	for k := range bufs {
		q := queue
		var hd wire.Header
		d := h.pool.Data(bufs[k])
		if l4, ok := wire.L4Offset(d); ok {
			if _, err := hd.Decode(d[l4+wire.UDPHeaderLen:]); err == nil && hd.Type == wire.TypeConnOpen {
				q = h.opens % h.Info().Queues
				h.opens++
			}
		}
		if h.Port.TxBurst(q, bufs[k:k+1]) != 1 {
			return k
		}
	}
	return len(bufs)
}

func (h *hopper) RxBurst(_ int, bufs []mbuf.Handle) int {
	n := 0
	for q := range h.Info().Queues {
		n += h.Port.RxBurst(q, bufs[n:])
	}
	return n
}

// TestRetransmittedConnOpenOnAnotherQueue: an initiator's ConnOpen goes
// out on queue 0 of a two-queue port, is not answered in time, and its
// retransmission goes out on queue 1, so the copies reach different
// shards' queues of a two-shard target. The connection is accepted once,
// by the shard its source CID names (the copy that landed elsewhere is
// handed over and answered as a repeat), comes up, and after the close
// every endpoint's table is empty: no shard holds a second, leaked
// connection.
func TestRetransmittedConnOpenOnAnotherQueue(t *testing.T) {
	const n = 2
	set, pool, tgtDev, iniDev := newSet(t, n, 0, 4096)
	clk := clock.NewVirtual(1_000_000)
	tgtIP, iniIP := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.1")
	var eps []*rt.Endpoint
	for i := range n {
		e, err := rt.NewEndpoint(rt.Options{Name: fmt.Sprintf("t%d", i), Port: set.Port(i), Queue: i, ShardBits: set.Bits(), Shard: i,
			Pool: pool, Clock: clk, LocalIP: tgtIP, Seed: uint64(10 + i), MaxConns: 8})
		require.NoError(t, err)
		eps = append(eps, e)
	}
	hop := &hopper{Port: iniDev, pool: pool}
	ini, err := rt.NewEndpoint(rt.Options{Name: "i", Port: hop, Pool: pool, Clock: clk, LocalIP: iniIP, Seed: 3, MaxConns: 8})
	require.NoError(t, err)
	all := append([]*rt.Endpoint{ini}, eps...)
	poll := func(es ...*rt.Endpoint) int {
		w := 0
		for _, e := range es {
			w += e.Poll(clk.Now())
		}
		return w
	}
	// run polls es until cond holds, jumping the clock to their next
	// deadline whenever nothing moves.
	run := func(cond func() bool, limit time.Duration, es ...*rt.Endpoint) {
		t.Helper()
		end := clk.Now().Add(limit)
		for !cond() {
			if poll(es...) > 0 {
				continue
			}
			next, ok := clock.Time(0), false
			for _, e := range es {
				if d, has := e.NextDeadline(); has && (!ok || d < next) {
					next, ok = d, true
				}
			}
			require.True(t, ok, "nothing left to happen, and the condition does not hold")
			next = max(next, clk.Now().Add(time.Microsecond))
			require.LessOrEqual(t, next, end, "the condition does not hold within %v", limit)
			require.NoError(t, clk.Set(next))
		}
	}

	c, err := ini.Open(rt.PeerAddr{MAC: [6]byte(tgtDev.Info().MAC), IP: tgtIP})
	require.NoError(t, err)
	// The target does not poll until the initiator resent its ConnOpen:
	// one copy waits on each queue.
	run(func() bool { return hop.opens == 2 }, time.Second, ini)
	owner := rt.CIDShard(c.LocalCID(), set.Bits())
	run(func() bool { return c.State() == rt.StateEstablished && eps[owner].Conns() == 1 && poll(all...) == 0 }, time.Second, all...)

	var accepted, conns uint64
	for _, e := range eps {
		accepted += e.Stats().ConnAccepted
		conns += uint64(e.Conns())
	}
	require.Equal(t, uint64(1), accepted, "one ConnOpen, retransmitted on another queue, makes one connection")
	require.Equal(t, uint64(1), conns, "no shard holds a second connection for it")
	st := eps[owner].Stats()
	require.Equal(t, uint64(1), st.ConnAccepted, "shard %d, which the initiator's CID %#x names, accepted the connection", owner, c.LocalCID())
	require.Equal(t, uint64(1), st.ConnDupOpen, "shard %d answered the copy from the other queue as a repeat", owner)
	require.NotZero(t, set.Stats(1-owner).SteeredOut, "the copy on the other shard's queue was handed over")

	require.NoError(t, c.Close())
	linger := 2 * ini.Options().CloseLinger
	run(func() bool {
		for _, e := range all {
			if e.Conns() != 0 {
				return false
			}
		}
		return true
	}, linger+time.Second, all...)
	for _, e := range all {
		e.Stop(clk.Now())
		require.NoError(t, e.CheckInvariants(), e.Name())
		require.NoError(t, e.Close())
	}
	buf := make([]mbuf.Handle, 64)
	for _, p := range []port.Port{tgtDev, iniDev} {
		for q := range n {
			for m := p.RxBurst(q, buf); m > 0; m = p.RxBurst(q, buf) {
				pool.Free(buf[:m])
			}
		}
	}
	closeAll(t, set, pool, tgtDev, iniDev)
}
