package rt

import (
	"fmt"
	"math/rand/v2"
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

// halfOpenSeeds is how many seeds TestNoHalfOutlivesItsPeer runs.
func halfOpenSeeds() int {
	if testing.Short() {
		return 60
	}
	return 1000
}

// The class behind the tests above, as a seed sweep: a connection with
// traffic both ways meets one fault — a direction goes dead, a side
// restarts, aborts, or closes while the peer's close is lost, both
// directions go down for a while and come back, or nothing — and after
// the idle timeout and a few keepalives more no half is left without its
// peer: either both are gone, or both are established with each other.
func TestNoHalfOutlivesItsPeer(t *testing.T) {
	faults := []string{"a→b dead", "b→a dead", "b restarts", "b aborts", "close, b's close lost", "both down a while", "none"}
	for seed := range halfOpenSeeds() {
		// A subtest a seed: each harness's pool (16 MiB) is freed at its
		// end, not the sweep's.
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 0x4a1f))
			fault := rng.IntN(len(faults))
			h := newHarness(t, func(a, b *Options) { a.Seed, b.Seed = uint64(2*seed+1), uint64(2*seed+2) })
			h.check = seed%16 == 0
			ca, cb := h.connect()
			h.sendAll(ca, wire.TypePushUnsolicitedData, 1, 1+rng.IntN(8), 64)
			h.sendAll(cb, wire.TypePushUnsolicitedData, 1, rng.IntN(8), 64)
			h.idle(time.Duration(rng.IntN(2000)) * time.Microsecond)
			drop := func(*wire.Frame) int { return 0 }
			switch fault {
			case 0:
				h.pa.tap = drop
			case 1:
				h.pb.tap = drop
			case 2:
				h.restartB(nil)
			case 3:
				cb.Abort()
			case 4:
				h.pb.tap = func(f *wire.Frame) int {
					if f.Header.Type == wire.TypeConnClose || f.Header.Type == wire.TypeResync {
						return 0
					}
					return 1
				}
				require.NoError(t, ca.Close())
			case 5:
				h.pa.tap, h.pb.tap = drop, drop
			}
			if fault != 4 && ca.State() == StateEstablished && rng.IntN(2) == 0 {
				h.sendAll(ca, wire.TypePushUnsolicitedData, 100, 1+rng.IntN(4), 64)
			}
			if fault == 5 {
				h.idle(time.Duration(rng.IntN(15_000)) * time.Millisecond)
				h.pa.tap, h.pb.tap = nil, nil
			}
			h.idle(DefaultIdleTimeout + 3*DefaultKeepAlive)
			na, nb := h.a.Conns(), h.b.Conns()
			ok := na == 0 && nb == 0
			if na == 1 && nb == 1 && ca.State() == StateEstablished {
				for i := range h.b.conns {
					if c := &h.b.conns[i]; c.state == StateEstablished && c.localCID == ca.PeerCID() && c.peerCID == ca.LocalCID() {
						ok = true
					}
				}
			}
			require.True(t, ok, "seed %d, fault %q: a holds %d (%v), b holds %d", seed, faults[fault], na, ca.State(), nb)
			require.Zero(t, h.a.Stats().Internal+h.b.Stats().Internal, "seed %d", seed)
		})
	}
}
