package swift_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt/swift"
)

// UndoTimeout takes back every timeout episode since the last ACK, once:
// the window is what it was before the first, and the episode count too
// (the next real timeout is a first episode again, not a reset).
func TestUndoTimeoutRestoresTheWindow(t *testing.T) {
	p := swift.DefaultParams()
	c := newController(t, p)
	now := clock.Time(1_000_000)
	c.OnAck(now, 10*us, 1)
	before := c.Cwnd()
	for range p.RetxResetThreshold {
		now = now.Add(100 * us)
		c.OnRetransmit(now, true)
	}
	require.Equal(t, p.MinCwnd, c.Cwnd(), "the episodes reset the window")
	c.UndoTimeout(now)
	require.Equal(t, before, c.Cwnd())
	require.EqualValues(t, 1, c.Stats().TimeoutUndos)
	c.UndoTimeout(now)
	require.EqualValues(t, 1, c.Stats().TimeoutUndos, "a second undo with no timeout since took something back")

	// After an ACK acknowledged something there is nothing to take back.
	now = now.Add(100 * us)
	c.OnRetransmit(now, true)
	cut := c.Cwnd()
	require.Less(t, cut, before)
	c.OnAck(now.Add(us), 10*us, 1)
	c.UndoTimeout(now.Add(2 * us))
	require.Less(t, c.Cwnd(), before)
	require.EqualValues(t, 1, c.Stats().TimeoutUndos)
}
