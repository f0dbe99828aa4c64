package txn

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
)

// opCase is one kind of operation the give-up tests post.
type opCase struct {
	name string
	post func(c *Conn, f *faultMem, timeout time.Duration) (uint32, error)
	// dataType is the type of the packets that carry the caller's buffer
	// (or the request, for a pull): none of them may leave after the
	// operation ended.
	dataType wire.Type
}

var giveUpCases = []opCase{
	{"unsolicited-push", func(c *Conn, f *faultMem, to time.Duration) (uint32, error) {
		return c.Push(Op{Local: f.rSrc, Len: 5000, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1, Timeout: to})
	}, wire.TypePushUnsolicitedData},
	{"solicited-push", func(c *Conn, f *faultMem, to time.Duration) (uint32, error) {
		return c.Push(Op{Local: f.rSrc, Len: 5000, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1, Timeout: to, Solicit: SolicitAlways})
	}, wire.TypePushRequest},
	{"pull", func(c *Conn, f *faultMem, to time.Duration) (uint32, error) {
		return c.Pull(Op{Local: f.rDst, Len: 5000, Remote: wire.RegionRef{Key: f.rRem.Key}, Tag: 1, Timeout: to})
	}, wire.TypePullRequest},
}

// An operation to a dead peer ends at its timeout, not when the
// transport's retries run out (the promise: "the initiator ends every
// operation with an error within the configured timeout"): its packets
// still unacknowledged are given up at the deadline (resyncs take their
// places: rt.Conn.Abandon), so the transport no longer references the
// buffer and the completion is posted then. Before, the completion waited
// for the connection to fail (about 2 s of resync retries here, against a
// 5 ms timeout). Nothing of the caller's buffer is sent after the
// deadline: only resyncs; and once the connection fails every context,
// entry and frame is back.
func TestTimeoutToDeadPeerEndsAtDeadline(t *testing.T) {
	const timeout = 5 * time.Millisecond
	for _, tc := range giveUpCases {
		t.Run(tc.name, func(t *testing.T) {
			p, m := newFaultPair(t, 31, func(a, b *Options) {
				a.Transport.RetryLimit = 20 // the default: retry exhaustion takes far longer than the timeout
			})
			f := newFaultMem(t, p, 64<<10)
			c := p.connect(ConnOptions{Ordered: true})
			p.run(func() bool { return p.settled() }, time.Second)
			baseOut := p.a.Outstanding()
			var after []wire.Type // frames A sent after the deadline
			deadline := p.clk.Now().Add(timeout)
			m.drop = func(fromA bool, h wire.HeaderView) bool {
				if fromA && p.clk.Now() >= deadline {
					after = append(after, h.Type())
				}
				return true // the target is dead: nothing arrives, nothing comes back
			}
			_, err := tc.post(c, f, timeout)
			require.NoError(t, err)
			posted := p.clk.Now()
			p.poll()
			require.Positive(t, c.Transport().Outstanding(wire.WindowRequest), "the operation is in flight")

			p.run(func() bool { return len(p.cqA) == 1 }, 10*time.Second)
			cp := p.cqA[0]
			require.Equal(t, StatusTimeout, cp.Status)
			require.Equal(t, posted, cp.Posted)
			// The deadline, give or take one poll (the virtual clock jumps
			// straight to the wheel's deadline, so exactly it here).
			require.GreaterOrEqual(t, cp.Latency(), timeout)
			require.LessOrEqual(t, cp.Latency(), timeout+p.a.rt.Options().TimerTick, "completed %v after posting, timeout %v", cp.Latency(), timeout)
			require.Equal(t, uint64(1), p.a.Stats().TimedOut)
			require.Positive(t, p.a.Transport().Stats().GivenUp, "its unacknowledged packets were given up")
			require.Equal(t, rt.StateEstablished, c.Transport().State(), "the connection lives on: the peer's death is the transport's to find")
			// The context waits for the resyncs (then its notice), not the
			// completion: the ULP already has its buffer back.
			require.Equal(t, baseOut+1, p.a.Outstanding())

			// The transport finds the peer dead in its own time; everything
			// comes back and the operation does not complete again.
			p.run(func() bool { return c.Transport() == nil }, 30*time.Second)
			p.poll()
			require.Len(t, p.cqA, 1, "completed exactly once")
			require.Equal(t, baseOut, p.a.Outstanding(), "contexts back to baseline")
			require.Zero(t, p.a.ro.Len())
			require.Zero(t, p.a.Transport().Stats().Internal)
			require.NotEmpty(t, after, "the resyncs were sent after the deadline")
			for _, ty := range after {
				require.NotEqual(t, tc.dataType, ty, "the operation's packet was sent after it ended: %v", after)
				require.NotEqual(t, wire.TypePushUnsolicitedData, ty)
				require.NotEqual(t, wire.TypePushSolicitedData, ty)
			}
		})
	}
}

// Cancel and timeout of an operation whose packets the network holds:
// the operation completes at once (cancel) or at its deadline (timeout)
// while its packets are still in flight. Its abort notice must not reach
// the target before the resyncs that stand in for those packets were
// acknowledged: else a late copy of a packet (one the network kept)
// could arrive after the target dropped the request and be placed, on
// an unordered connection even start a new request there that never
// completes. So the network here loses every resync for a while and then
// delivers the stale originals: the notice has not gone out, the
// originals are placed (allowed: the remote span of a given-up push is
// undefined) and are duplicates once the resyncs come through; then the
// notice, and both ends settle with nothing leaked.
func TestGivenUpPacketsNeverPlacedLate(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		name := "timeout"
		if cancel {
			name = "cancel"
		}
		for _, tc := range giveUpCases[:2] {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				p, m := newFaultPair(t, 32, func(a, b *Options) { a.Transport.RetryLimit = 20 })
				f := newFaultMem(t, p, 64<<10)
				c := p.connect(ConnOptions{}) // unordered: no RSN order to turn a late packet away
				p.run(func() bool { return p.settled() }, time.Second)

				// The network keeps A's packets of the operation (and
				// drops everything else) until the operation has ended.
				var held []mbuf.Handle
				holding := true
				m.keep = func(fromA bool, h wire.HeaderView) bool {
					return holding && fromA && h.Type() == tc.dataType
				}
				m.held = &held
				m.drop = func(fromA bool, h wire.HeaderView) bool {
					return holding || fromA && h.Type() == wire.TypeResync
				}
				const timeout = 5 * time.Millisecond
				to := timeout
				if cancel {
					to = 0
				}
				rsn, err := tc.post(c, f, to)
				require.NoError(t, err)
				p.poll()
				require.NotEmpty(t, held, "the network holds the operation's packets")
				if cancel {
					require.NoError(t, c.Cancel(rsn))
					p.poll()
					require.Len(t, p.cqA, 1, "a cancelled operation completes at once, its packets in flight or not")
					require.Equal(t, StatusCancelled, p.cqA[0].Status)
				} else {
					p.run(func() bool { return len(p.cqA) == 1 }, time.Second)
					require.Equal(t, StatusTimeout, p.cqA[0].Status)
					require.Equal(t, timeout, p.cqA[0].Latency())
				}
				// The buffer is the caller's again.
				clear(f.src)

				// The link is back, but for the resyncs, for a while.
				holding = false
				p.runFor(func() bool { return false }, 20*time.Millisecond)
				require.Zero(t, p.b.Stats().NoticesReceived, "the notice went out before the given-up packets' resyncs were acknowledged")
				// The stale originals arrive now, then the resyncs.
				for _, h := range held {
					require.Equal(t, 1, m.b.TxBurst(0, []mbuf.Handle{h}))
				}
				held = held[:0]
				p.runFor(func() bool { return false }, time.Millisecond)
				m.drop = nil
				p.run(func() bool { return p.settled() }, 5*time.Second)
				require.Equal(t, uint64(1), p.a.Stats().NoticesAcked)
				require.Equal(t, uint64(1), p.b.Stats().NoticesReceived)
				// Once the target has the notice, nothing of the operation
				// can reach its memory: its transport has every PSN.
				snap := append([]byte(nil), f.remote...)
				p.runFor(func() bool { return false }, 10*time.Millisecond)
				require.True(t, bytes.Equal(snap, f.remote))
				p.requireSettled()
				require.Len(t, p.cqA, 1, "completed exactly once")
				require.Zero(t, p.a.Transport().Stats().Internal)
				require.Zero(t, p.b.Transport().Stats().Internal)
				require.Equal(t, rt.StateEstablished, c.Transport().State())
			})
		}
	}
}

// An operation whose status is decided (the target refused a segment)
// while another of its segments is still in flight ends by its deadline
// with that status: the timeout gives up what is left instead of waiting
// for the transport's retry budget.
func TestTimeoutEndsDecidedOperationWithPacketsInFlight(t *testing.T) {
	p, m := newFaultPair(t, 33, func(a, b *Options) { a.Transport.RetryLimit = 20 })
	f := newFaultMem(t, p, 64<<10)
	c := p.connect(ConnOptions{})
	seg := uint32(p.a.Segment())
	// The second segment never gets through; the first reaches the
	// target, which refuses it (no region under the key).
	m.drop = func(fromA bool, h wire.HeaderView) bool {
		return fromA && h.Type() == wire.TypePushUnsolicitedData && h.Offset() == seg
	}
	const timeout = 5 * time.Millisecond
	_, err := c.Push(Op{Local: f.rSrc, Len: int(2 * seg), Remote: wire.RegionRef{Key: f.rRem.Key + 99}, Tag: 1, Timeout: timeout, Solicit: SolicitNever})
	require.NoError(t, err)
	p.run(func() bool { return len(p.cqA) == 1 }, 10*time.Second)
	require.Equal(t, StatusRemoteAccess, p.cqA[0].Status, "the refusal decided it")
	require.LessOrEqual(t, p.cqA[0].Latency(), timeout, "ended by its deadline, not after the second segment's retries")
	require.Zero(t, p.a.Stats().TimedOut, "it did not time out: its status was decided")
	m.drop = nil
	p.run(func() bool { return p.settled() }, 5*time.Second)
	p.requireSettled()
	require.Len(t, p.cqA, 1)
}
