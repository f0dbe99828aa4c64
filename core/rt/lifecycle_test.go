package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// What a call between Polls counts (Open, Close, Abort) is published
// before it returns: Stats and QPNStats are not left stale behind idle
// Polls.
func TestStatsPublishedAfterCallsBetweenPolls(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { a.QPN.Enabled, b.QPN.Enabled = true, true })
	ca, _ := h.connect()
	h.idle(time.Millisecond)
	s0, q0 := h.a.Stats(), h.a.QPNStats()
	ca.Abort()
	require.Equal(t, s0.ConnFailed+1, h.a.Stats().ConnFailed, "right after Abort")
	require.Equal(t, q0.CAM.Closed+1, h.a.QPNStats().CAM.Closed, "the retired QPN, right after Abort")
	require.Zero(t, h.a.Poll(h.clk.Now()), "an idle Poll")
	require.Equal(t, s0.ConnFailed+1, h.a.Stats().ConnFailed, "after an idle Poll")

	c2, err := h.a.Open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(t, err)
	require.Equal(t, s0.ConnOpened+1, h.a.Stats().ConnOpened, "right after Open")
	require.NoError(t, c2.Close())
	require.Equal(t, s0.ConnClosed+1, h.a.Stats().ConnClosed, "right after Close")
}

// A closing connection whose peer's close never arrives (every ConnClose
// and resync of the peer lost, until the peer gave up) does not stay
// closing: with nothing of its own outstanding it still runs a timer, and
// ends once the peer is found gone.
func TestClosingEndsWhenPeerGaveUp(t *testing.T) {
	h := newHarness(t, nil)
	ca, cb := h.connect()
	h.idle(time.Millisecond)
	h.pb.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeConnClose || f.Header.Type == wire.TypeResync {
			return 0
		}
		return 1
	}
	require.NoError(t, ca.Close())
	ok := h.runFor(func() bool { return h.a.Conns() == 0 && h.b.Conns() == 0 }, 10*time.Second)
	require.True(t, ok, "a %v %v, b %v %v", ca.State(), ca.Err(), cb.State(), cb.Err())
}

// A side that gives up (its retries ran out: the path back from its peer
// is dead) tells its peer on the path that still works, so the peer, with
// nothing outstanding, does not keep a half-open connection: it ends it
// within a round trip.
func TestGiveUpToldToPeer(t *testing.T) {
	h := newHarness(t, nil)
	ca, cb := h.connect()
	h.idle(time.Millisecond)
	h.pb.tap = func(*wire.Frame) int { return 0 } // b → a dead
	h.sendAll(ca, wire.TypePushUnsolicitedData, 1, 4, 100)
	h.run(func() bool { return ca.State() == StateFailed }, 10*time.Second)
	require.ErrorIs(t, ca.Err(), ErrRetryExhausted)
	gaveUp := h.clk.Now()
	h.run(func() bool { return cb.State() == StateFailed }, 10*time.Second)
	require.ErrorIs(t, cb.Err(), ErrPeerReset)
	require.LessOrEqual(t, h.clk.Now().Sub(gaveUp), time.Millisecond, "the peer heard at once")
	require.Positive(t, h.a.Stats().GiveUpNotices)
}

// An initiator that crashes and restarts again and again (each
// incarnation's connection left behind at the target) cannot fill the
// target's table: a ConnOpen that finds it full has the target probe its
// silent connections, the dead halves are found (the new incarnation
// answers with a bad-CID NACK) and the newcomer gets in within a few round
// trips.
func TestRestartingInitiatorCannotFillTable(t *testing.T) {
	h := newHarness(t, func(a, b *Options) { b.MaxConns = 4 })
	for i := range 4 {
		ca, _ := h.connect()
		require.Equal(t, StateEstablished, ca.State(), "incarnation %d", i)
		h.idle(time.Millisecond)
		h.restartA(nil) // crash: b is not told
	}
	require.Equal(t, 4, h.b.Conns(), "four dead halves fill the table")
	start := h.clk.Now()
	ca, _ := h.connect()
	require.Equal(t, StateEstablished, ca.State())
	require.Less(t, h.clk.Now().Sub(start), 50*time.Millisecond, "the newcomer waited for a timer, not for the table's reclaim")
	require.Positive(t, h.b.Stats().ReclaimProbes)
}

// By default an idle connection is watched at a cost of nothing
// measurable: both ends alive, it stays open for an hour with about one
// probe a second each way; its peer vanished without a word, its half is
// freed within the idle timeout.
func TestIdleDefaults(t *testing.T) {
	h := newHarness(t, nil)
	ca, cb := h.connect()
	h.idle(time.Hour)
	require.Equal(t, StateEstablished, ca.State())
	require.Equal(t, StateEstablished, cb.State())
	probes := h.a.Stats().KeepAliveSent + h.b.Stats().KeepAliveSent
	require.Positive(t, probes)
	require.LessOrEqual(t, probes, uint64(2*3600+2), "at most a probe a second each way")

	h.pb.tap = func(*wire.Frame) int { return 0 } // b vanishes
	h.pa.tap = func(*wire.Frame) int { return 0 }
	start := h.clk.Now()
	h.run(func() bool { return ca.State() == StateFailed && cb.State() == StateFailed }, time.Minute)
	require.LessOrEqual(t, h.clk.Now().Sub(start), DefaultIdleTimeout+DefaultKeepAlive)
	require.Zero(t, h.a.Conns())
	require.Zero(t, h.b.Conns())
}
