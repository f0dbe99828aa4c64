package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
