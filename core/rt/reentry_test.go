package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// The ULP's re-entrancy rule: any of its methods may end the connection it
// is told about and Open another, which takes the freed slot at once (the
// free list is last in, first out). These tests do exactly that from each
// of the three methods and check that what the endpoint was processing —
// a data packet, an ACK, the packet that established the connection — does
// not spill onto the new connection that now holds the slot.

// reopen aborts c and opens a connection from e to peer in its place; it
// fails the test unless the new one took c's slot.
func reopen(t *testing.T, e *Endpoint, c *Conn, peer PeerAddr) *Conn {
	old := c.c
	c.Abort()
	n, err := e.Open(peer)
	require.NoError(t, err)
	require.Same(t, old, n.c, "the new connection should take the freed slot")
	return n
}

func TestDeliverMayEndItsConnection(t *testing.T) {
	h := newHarness(t, nil)
	ca, cb := h.connect()
	var reopened *Conn
	var fresh [2]WindowState
	setDeliver(h.b, func(c *Conn, _ *wire.Header, _ []byte) Verdict {
		if reopened == nil {
			reopened = reopen(t, h.b, c, PeerAddr{MAC: macOf(h.pa), IP: ipA})
			fresh = [2]WindowState{reopened.Window(wire.WindowRequest), reopened.Window(wire.WindowData)}
		}
		return Accept
	})
	h.sendAll(ca, wire.TypePushUnsolicitedData, 1, 1, 64)
	h.run(func() bool { return reopened != nil }, 10*time.Millisecond)
	require.Equal(t, StateFailed, cb.State())
	require.Equal(t, fresh, [2]WindowState{reopened.Window(wire.WindowRequest), reopened.Window(wire.WindowData)},
		"the old connection's packet moved the new connection's receive window")
	require.Zero(t, reopened.Stats().Delivered)
	require.Zero(t, h.b.Stats().Internal)
}

func TestAckedMayEndItsConnection(t *testing.T) {
	// Four packets, one ACK for all of them: the ULP hears of the first and
	// ends the connection; the other three go with it, unreported.
	h := newHarness(t, func(_, b *Options) { b.AckEvery, b.AckDelay = 4, time.Second })
	ca, _ := h.connect()
	var cookies []uint64
	var reopened *Conn
	setAcked(h.a, func(c *Conn, _ wire.Window, _ uint32, cookie uint64) {
		cookies = append(cookies, cookie)
		require.Same(t, ca, c, "an ACK of the old connection's packet reached another")
		if reopened == nil {
			reopened = reopen(t, h.a, c, PeerAddr{MAC: macOf(h.pb), IP: ipB})
		}
	})
	for i := range 4 {
		_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, Cookie: uint64(i + 1)}, payload(uint64(i), 64))
		require.NoError(t, err)
	}
	h.run(func() bool { return reopened != nil }, 10*time.Millisecond)
	require.Equal(t, []uint64{1}, cookies)
	require.Equal(t, StateFailed, ca.State())
	require.Zero(t, h.a.Stats().Internal, "the ACK went on retiring packets of a connection that was gone")
	require.Zero(t, reopened.Stats().AcksReceived)
	require.Zero(t, reopened.Outstanding(wire.WindowRequest))
}

func TestEventMayEndItsConnection(t *testing.T) {
	// The target is established by the initiator's ACK of ConnAccept; its
	// ULP ends the connection when told, and that ACK must stop there.
	h := newHarness(t, nil)
	var gone, reopened *Conn
	setEvents(h.b, func(ev Event) {
		h.evB = append(h.evB, ev)
		if ev.Kind == EventEstablished && reopened == nil {
			gone = ev.Conn
			reopened = reopen(t, h.b, ev.Conn, PeerAddr{MAC: macOf(h.pa), IP: ipA})
		}
	})
	_, err := h.a.Open(PeerAddr{MAC: macOf(h.pb), IP: ipB})
	require.NoError(t, err)
	h.run(func() bool { return reopened != nil }, 10*time.Millisecond)
	require.Equal(t, StateFailed, gone.State())
	require.Equal(t, StateOpening, reopened.State())
	require.Zero(t, reopened.Stats().AcksReceived, "the old connection's ACK was processed on the new one")
	require.Zero(t, h.b.Stats().AckForged)
	require.Zero(t, h.b.Stats().Internal)
}
