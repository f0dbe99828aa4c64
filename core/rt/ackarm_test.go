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
