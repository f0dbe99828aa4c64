package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestDelayedAckTimerArmedAfterBurst: the delayed-ACK timer is armed once
// the receive burst is done (armAckTimers), only when no ACK goes out in
// the same Poll, and it then fires AckDelay later as before.
func TestDelayedAckTimerArmedAfterBurst(t *testing.T) {
	rb, err := newRxFeed(DefaultBurst, 64, false)
	require.NoError(t, err)
	defer func() { require.NoError(t, rb.close()) }()
	e := rb.e

	// A full burst: AckEvery is reached, the ACK goes out in this Poll and
	// no timer is left behind.
	require.NoError(t, rb.fill(DefaultBurst))
	sent := rb.port.sent
	rb.drain()
	require.Equal(t, sent+1, rb.port.sent, "one coalesced ACK for the burst")
	_, pending := e.NextDeadline()
	require.False(t, pending, "no delayed-ACK timer once the ACK went out")
	require.Equal(t, 0, e.ackArmQ.len())

	// Fewer than AckEvery packets: no ACK now, a timer AckDelay ahead.
	require.NoError(t, rb.fill(DefaultAckEvery-1))
	sent = rb.port.sent
	rb.drain()
	require.Equal(t, sent, rb.port.sent)
	at, pending := e.NextDeadline()
	require.True(t, pending)
	// The wheel rounds the deadline up to its tick.
	require.GreaterOrEqual(t, at, e.Now().Add(DefaultAckDelay))
	require.LessOrEqual(t, at, e.Now().Add(DefaultAckDelay+DefaultTimerTick))
	c := e.liveConn(rb.hdr.DestCID)
	require.NotNil(t, c)
	require.NotEqual(t, 0, int(c.ackTimer))

	// Another short burst keeps the same timer.
	timer := c.ackTimer
	require.NoError(t, rb.fill(1))
	rb.drain()
	require.Equal(t, sent+1, rb.port.sent, "AckEvery reached across bursts")
	require.Zero(t, int(c.ackTimer), "the ACK cancelled the timer")
	require.NotEqual(t, timer, c.ackTimer)

	// A short burst, then the timer fires and the ACK goes out.
	require.NoError(t, rb.fill(1))
	rb.drain()
	require.Equal(t, sent+1, rb.port.sent)
	rb.clk.Advance(DefaultAckDelay + DefaultTimerTick)
	e.Poll(rb.clk.Now())
	require.Equal(t, sent+2, rb.port.sent, "the delayed ACK")
	_, pending = e.NextDeadline()
	require.False(t, pending)

	// FlagAckRequested: the ACK goes out at once, no timer.
	rb.hdr.Flags = wire.FlagAckRequested
	require.NoError(t, rb.fill(1))
	rb.hdr.Flags = 0
	rb.drain()
	require.Equal(t, sent+3, rb.port.sent)
	_, pending = e.NextDeadline()
	require.False(t, pending)

	// A connection dropped while it waits for its timer leaves no entry.
	require.NoError(t, rb.fill(1))
	rb.drain()
	require.NotZero(t, int(c.ackTimer))
	c.handle.Abort()
	require.Equal(t, 0, e.ackArmQ.len())
	_, pending = e.NextDeadline()
	require.False(t, pending)
	rb.clk.Advance(time.Millisecond)
	e.Poll(rb.clk.Now())
	require.Equal(t, sent+3, rb.port.sent)
}

// TestLonePushAsksForItsAck: a push's last packet from a sender about to
// go idle with fewer than AckEvery packets in flight asks for the ACK
// (FlagAckRequested), so the receiver answers at once rather than after
// its AckDelay (a second here); with AckEvery or more in flight the
// coalescing is left as it was, and no packet asks; nor does a lone packet
// of another kind, which an answer on the wire acknowledges.
func TestLonePushAsksForItsAck(t *testing.T) {
	h := newHarness(t, func(_, b *Options) { b.AckEvery, b.AckDelay = 4, time.Second })
	ca, _ := h.connect()
	asked := 0
	h.pa.tap = func(f *wire.Frame) int {
		first := f.Header.Flags&wire.FlagRetransmission == 0
		if f.Header.Type == wire.TypePushUnsolicitedData && first && f.Header.Flags&wire.FlagAckRequested != 0 {
			asked++
		}
		return 1
	}
	start := h.clk.Now()
	_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, Cookie: 1}, payload(1, 64))
	require.NoError(t, err)
	h.run(func() bool { return ca.Outstanding(wire.WindowRequest) == 0 }, 2*time.Second)
	require.Equal(t, 1, asked, "the lone packet did not ask for its ACK")
	require.Less(t, h.clk.Now().Sub(start), time.Millisecond, "the lone packet's ACK waited")
	require.Zero(t, h.a.Stats().TxRetransmit, "the lone packet was resent: its ACK waited for the receiver's AckDelay")

	// Eight in one poll: none asks; the receiver's count sends the ACK.
	asked = 0
	for i := range 8 {
		_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, Cookie: uint64(i + 2)}, payload(uint64(i), 64))
		require.NoError(t, err)
	}
	start = h.clk.Now()
	h.run(func() bool { return ca.Outstanding(wire.WindowRequest) == 0 }, 2*time.Second)
	require.Less(t, h.clk.Now().Sub(start), time.Millisecond)
	require.Zero(t, asked, "a sender with AckEvery in flight asked for an ACK")
	require.Zero(t, h.a.Stats().TxRetransmit)

	// A lone pull request does not ask.
	pulls, requested := 0, 0
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePullRequest && f.Header.Flags&wire.FlagRetransmission == 0 {
			pulls++
			if f.Header.Flags&wire.FlagAckRequested != 0 {
				requested++
			}
		}
		return 1
	}
	_, err = ca.Send(SendHeader{Type: wire.TypePullRequest, Cookie: 20, ReqLen: 64}, nil)
	require.NoError(t, err)
	h.poll()
	require.Equal(t, 1, pulls, "the pull request went out")
	require.Zero(t, requested, "a lone pull request asked for an ACK")
}
