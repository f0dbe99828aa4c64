package txn

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// events records the connection events of both endpoints of a pair.
type events struct{ a, b []ConnEvent }

func withEvents(ev *events) func(a, b *Options) {
	return func(a, b *Options) {
		a.OnConnEvent = func(e ConnEvent) { ev.a = append(ev.a, e) }
		b.OnConnEvent = func(e ConnEvent) { ev.b = append(ev.b, e) }
	}
}

func kinds(evs []ConnEvent) []ConnEventKind {
	var k []ConnEventKind
	for _, e := range evs {
		k = append(k, e.Kind)
	}
	return k
}

// Established at both ends, closed at both ends after Close.
func TestConnEventsEstablishedClosed(t *testing.T) {
	var ev events
	p, _ := newFaultPair(t, 20, withEvents(&ev))
	c := p.connect(ConnOptions{})
	p.run(func() bool { return len(ev.b) == 1 }, time.Second)
	require.Equal(t, []ConnEventKind{ConnEstablished}, kinds(ev.a))
	require.Same(t, c, ev.a[0].Conn)
	require.Equal(t, []ConnEventKind{ConnEstablished}, kinds(ev.b))
	require.True(t, ev.b[0].Conn.Live(), "the target's handle, first seen in the event")
	require.NoError(t, c.Close())
	p.run(func() bool { return len(ev.a) == 2 && len(ev.b) == 2 }, time.Second)
	require.Equal(t, ConnClosed, ev.a[1].Kind)
	require.Equal(t, ConnClosed, ev.b[1].Kind)
	require.False(t, c.Live())
}

// Cancel: an operation not yet sent completes at once (in its turn) with
// StatusCancelled, the target is told so that the request behind it on
// an ordered connection is still delivered, and nothing is left.
func TestCancel(t *testing.T) {
	p, _ := newFaultPair(t, 21, nil)
	f := newFaultMem(t, p, 64<<10)
	c, err := p.a.Open(p.peerB(), ConnOptions{Ordered: true})
	require.NoError(t, err)
	// Not established yet: both wait in the scheduler.
	r1, err := c.Pull(Op{Local: f.rDst, Len: 5000, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
	require.NoError(t, err)
	_, err = c.Push(Op{Local: f.rSrc, Len: 300, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: 100}, Tag: 2})
	require.NoError(t, err)
	require.NoError(t, c.Cancel(r1))
	require.ErrorIs(t, c.Cancel(r1), ErrNoOp, "cancelled already")
	require.ErrorIs(t, c.Cancel(r1+7), ErrNoOp, "never posted")
	p.poll()
	require.Len(t, p.cqA, 1, "an operation with nothing in flight completes at once")
	require.Equal(t, StatusCancelled, p.cqA[0].Status)
	p.run(func() bool { return len(p.cqA) == 2 && len(p.reqB) == 1 && p.settled() }, time.Second)
	require.Equal(t, StatusOK, p.cqA[1].Status)
	require.Equal(t, r1+1, p.reqB[0].RSN, "the push behind the cancelled pull reached the target's ULP")
	require.True(t, bytes.Equal(f.src[:300], f.remote[100:400]))
	require.Equal(t, uint64(1), p.a.Stats().Cancelled)
	p.requireSettled()
}

// Cancel of an operation whose packets are in flight to a dead peer: it
// completes, cancelled, at once — its packets are given up (resyncs take
// their places), so the transport no longer holds the source.
func TestCancelInFlight(t *testing.T) {
	p, m := newFaultPair(t, 22, nil)
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{})
	m.drop = func(bool, wire.HeaderView) bool { return true }
	rsn, err := c.Push(Op{Local: f.rSrc, Len: 3000, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
	require.NoError(t, err)
	p.poll()
	require.Positive(t, c.Transport().Outstanding(wire.WindowRequest), "the push is in flight")
	require.NoError(t, c.Cancel(rsn))
	p.poll()
	require.Len(t, p.cqA, 1, "completes at once: the transport gave its packets up")
	require.Equal(t, StatusCancelled, p.cqA[0].Status)
	require.Positive(t, p.a.Transport().Stats().GivenUp)
	p.run(func() bool { return c.Transport() == nil }, 5*time.Second) // the dead peer is found
	p.poll()
	require.Len(t, p.cqA, 1, "completed exactly once")
	p.requireSettled()
}

// Abort flushes every operation (StatusFlushed, posting order), emits
// ConnFailed once with rt.ErrAborted, and the transport's own report of
// the abort (rt.EventFailed with rt.ErrAborted) changes nothing after it.
func TestAbort(t *testing.T) {
	for _, early := range []bool{false, true} {
		name := "transport-reports-after"
		if early {
			name = "transport-reports-during"
		}
		t.Run(name, func(t *testing.T) {
			var ev events
			p, m := newFaultPair(t, 23, withEvents(&ev))
			f := newFaultMem(t, p, 64<<10)
			c := p.connect(ConnOptions{Ordered: true})
			m.drop = func(bool, wire.HeaderView) bool { return true } // the peer is gone
			for i := range 4 {
				_, err := c.Push(Op{Local: f.rSrc, Len: 2000 * (i + 1), Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: uint64(i), Solicit: Solicit(i % 3)})
				require.NoError(t, err)
			}
			_, err := c.Pull(Op{Local: f.rDst, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 4})
			require.NoError(t, err)
			p.poll()
			p.poll()
			rc := c.Transport()
			failed := rt.Event{Kind: rt.EventFailed, Conn: rc, Err: rt.ErrAborted}
			if early {
				// As the transport will once rt.Conn.Abort reports itself:
				// the event arrives inside Abort, before txn's own flush.
				c.live().aborting = true
				rc.Abort()
				p.a.onEvent(failed)
				require.ErrorIs(t, c.Abort(), ErrClosed)
			} else {
				require.NoError(t, c.Abort())
				p.a.onEvent(failed) // the transport's report, after ours
				p.a.onEvent(failed)
			}
			n := p.a.Completions(p.buf)
			require.Equal(t, 5, n, "every operation completed once")
			for i, cp := range p.buf[:n] {
				require.Equal(t, uint64(i), cp.Tag, "posting order")
				require.Equal(t, StatusFlushed, cp.Status)
			}
			require.Equal(t, []ConnEventKind{ConnEstablished, ConnFailed}, kinds(ev.a))
			require.ErrorIs(t, ev.a[1].Err, rt.ErrAborted)
			require.Zero(t, p.a.Outstanding())
			require.Zero(t, p.a.ro.Len())
			require.Zero(t, p.a.sch.Len())
			require.Equal(t, rt.StateFailed, rc.State(), "the transport connection is gone")
			_, err = c.Push(Op{Local: f.rSrc, Len: 1, Remote: wire.RegionRef{Key: f.rRem.Key}})
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}

// A connection failing in the transport: its operations complete with
// StatusConnFailed, then ConnFailed says why.
func TestConnFailedEvent(t *testing.T) {
	var ev events
	p, m := newFaultPair(t, 24, withEvents(&ev))
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{})
	m.drop = func(bool, wire.HeaderView) bool { return true }
	_, err := c.Push(Op{Local: f.rSrc, Len: 100, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
	require.NoError(t, err)
	var cqAtEvent int
	p.a.opts.OnConnEvent = func(e ConnEvent) {
		ev.a = append(ev.a, e)
		cqAtEvent = p.a.cq.size
	}
	p.run(func() bool { return len(ev.a) == 2 }, 10*time.Second)
	require.Equal(t, ConnFailed, ev.a[1].Kind)
	require.ErrorIs(t, ev.a[1].Err, rt.ErrRetryExhausted)
	require.Equal(t, 1, cqAtEvent, "the completion is queued before the event")
	p.poll()
	require.Equal(t, StatusConnFailed, p.cqA[0].Status)
}

// Pushes and pulls, ordered and not, solicited and not, across the 2^32
// wrap of RSN and SSN (Options.InitialSeq).
func TestSequenceWrap(t *testing.T) {
	const start = ^uint32(0) - 1 // RSNs and SSNs both wrap after two
	p, _ := newFaultPair(t, 25, func(a, b *Options) { a.InitialSeq, b.InitialSeq = start, start })
	seg := p.a.Segment()
	f := newFaultMem(t, p, 256<<10)
	for _, ordered := range []bool{true, false} {
		c := p.connect(ConnOptions{Ordered: ordered})
		p.cqA, p.reqB = nil, nil
		clear(f.dst)
		var rsns []uint32
		for i := range 14 {
			n := 100 + i*seg/2
			off := uint64(i) * uint64(16<<10)
			op := Op{Local: f.rSrc, LocalAddr: off, Len: n, Remote: wire.RegionRef{Key: f.rRem.Key, Addr: off}, Tag: uint64(i), Solicit: Solicit(i % 3)}
			var rsn uint32
			var err error
			if i%4 == 3 {
				op.Local = f.rDst
				rsn, err = c.Pull(op)
			} else {
				rsn, err = c.Push(op)
			}
			require.NoError(t, err)
			rsns = append(rsns, rsn)
		}
		require.Equal(t, start, rsns[0])
		require.Equal(t, uint32(11), rsns[13], "RSNs wrapped")
		p.run(func() bool { return len(p.cqA) == 14 && p.settled() }, time.Second)
		for i, cp := range p.cqA {
			require.Equal(t, StatusOK, cp.Status, "tag %d", cp.Tag)
			if ordered {
				require.Equal(t, uint64(i), cp.Tag, "posting order across the wrap")
			}
		}
		require.Len(t, p.reqB, 14)
		for i, r := range p.reqB {
			if ordered {
				require.Equal(t, rsns[i], r.RSN, "request order across the wrap")
			}
		}
		for i := range 14 {
			n := 100 + i*seg/2
			off := i * (16 << 10)
			if i%4 == 3 {
				require.True(t, bytes.Equal(f.dst[off:off+n], f.remote[off:off+n]), "pull %d", i)
			} else {
				require.True(t, bytes.Equal(f.src[off:off+n], f.remote[off:off+n]), "push %d", i)
			}
		}
		require.NoError(t, c.Close())
		p.run(func() bool { return !c.Live() && c.Transport() == nil }, time.Second)
	}
	p.requireSettled()
}

// Work that waits in the scheduler is not the peer's silence: an
// operation posted on a quiet connection whose loop then does not get to
// send it for longer than an RTO (a loop starved of CPU, or thousands of
// connections ahead of it in the scheduler) must not make the transport
// probe the peer — it has been told nothing yet. Probes start with the
// first packet sent. Before, posting alone armed them, and a thousand
// such connections spent the transmit budget on probes instead of data.
func TestQueuedWorkIsNotPeerSilence(t *testing.T) {
	p := newPair(t, 31, "delay=10us", nil)
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{})
	p.clk.Advance(20 * time.Millisecond) // the connection has been quiet for a while
	p.poll()
	_, err := c.Push(Op{Local: f.rSrc, Len: 3000, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1})
	require.NoError(t, err)
	p.clk.Advance(50 * time.Millisecond) // the loop is starved: nothing sent yet
	p.run(func() bool { return len(p.cqA) == 1 && p.settled() }, time.Second)
	require.Equal(t, StatusOK, p.cqA[0].Status)
	require.Zero(t, p.a.Transport().Stats().AwaitProbes, "no probe for work the peer has not been sent")
	require.Zero(t, p.b.Transport().Stats().AwaitProbes)
}
