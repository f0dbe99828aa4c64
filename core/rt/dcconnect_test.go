package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestEarlyDataGoesWithTheConnect: packets sent on an OpenEarly
// connection before any poll leave right behind its ConnOpen and are
// delivered by the target's first poll, which establishes it first.
func TestEarlyDataGoesWithTheConnect(t *testing.T) {
	h := newHarness(t, nil)
	ca, err := h.a.OpenEarly(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(t, err)
	require.Equal(t, StateOpening, ca.State())
	h.sendAll(ca, wire.TypePushUnsolicitedData, 1, 4, 100)
	now := h.clk.Now()
	h.a.Poll(now) // ConnOpen, then the four packets
	h.b.Poll(now) // accepts, establishes, delivers
	require.Len(t, h.gotB, 4, "delivered in the target's first poll")
	require.Equal(t, EventEstablished, h.evB[0].Kind, "established before the data")
	for i, d := range h.gotB {
		require.Equal(t, uint64(1+i), d.seq)
	}
	h.run(func() bool { return ca.State() == StateEstablished && h.quiet() }, 10*time.Millisecond)
	require.Zero(t, h.a.Stats().TxRetransmit)
	// After ConnAccept the connection is an ordinary one.
	h.sendAll(ca, wire.TypePushUnsolicitedData, 5, 3, 100)
	h.run(func() bool { return len(h.gotB) == 7 && h.quiet() }, 10*time.Millisecond)
}

// TestEarlyConnectLost: the first ConnOpen is lost; the data that arrives
// without it is dropped and counted, and both are resent until the target
// has the connection and every packet, each delivered once.
func TestEarlyConnectLost(t *testing.T) {
	h := newHarness(t, nil)
	dropped := false
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeConnOpen && !dropped {
			dropped = true
			return 0
		}
		return 1
	}
	ca, err := h.a.OpenEarly(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(t, err)
	h.sendAll(ca, wire.TypePushUnsolicitedData, 1, 4, 100)
	h.run(func() bool { return len(h.gotB) == 4 && h.quiet() && ca.State() == StateEstablished }, 100*time.Millisecond)
	require.True(t, dropped)
	require.Positive(t, h.b.Stats().RxBadState, "early data without its connection, counted")
	for i, d := range h.gotB {
		require.Equal(t, uint64(1+i), d.seq, "each once, in order")
	}
}

// TestEarlyConnectRefused: a target that refuses fails the connection
// (ErrRefused) and delivers nothing of its early data.
func TestEarlyConnectRefused(t *testing.T) {
	h := newHarness(t, func(_, b *Options) { b.Accept = func(PeerAddr) bool { return false } })
	ca, err := h.a.OpenEarly(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(t, err)
	h.sendAll(ca, wire.TypePushUnsolicitedData, 1, 4, 100)
	h.run(func() bool { return ca.State() == StateFailed }, 100*time.Millisecond)
	require.ErrorIs(t, ca.Err(), ErrRefused)
	require.Empty(t, h.gotB)
	require.Positive(t, h.b.Stats().RxBadState)
	require.Zero(t, h.a.Outstanding())
}
