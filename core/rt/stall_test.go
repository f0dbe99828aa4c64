package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// A sender whose own loop stops for five timeouts while its peer receives
// and acknowledges everything it sent resends nothing, though its first
// poll after the stop reads fewer ACKs than wait in its receive ring (a
// burst of one): the poll reads before its timers fire, and an ACK that
// acknowledges new data restarts the timeout from now, so the packets
// whose ACKs are still in the ring are not timed out. (The resends the
// small-operation bench counts on lossless rows follow the receiver's
// stops, which TestStalledPeerCostsOneProbePerTimeout covers.)
func TestStalledSenderReadsItsAcksBeforeItsTimers(t *testing.T) {
	const burst = 1
	h, ca, sw := frtoHarnessWith(t, func(a *Options) {
		a.Burst = burst // fewer frames a poll than the ACKs the stop leaves
	})
	const n = 64
	require.GreaterOrEqual(t, sw.Cwnd(), float64(n))
	rto, delivered, before := ca.RTO(), len(h.gotB), h.a.Stats()
	acksBefore := h.b.Stats().TxAck
	for i := range n {
		_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i)}, payload(uint64(1000+i), 64))
		require.NoError(t, err)
	}
	for h.a.Stats().TxData-before.TxData < n { // out, a burst a poll
		require.Positive(t, h.a.Poll(h.clk.Now()))
	}
	// a's loop stops; b's runs on and acknowledges everything.
	end := h.clk.Now().Add(5 * rto)
	h.pollOnly(h.b, end)
	require.Len(t, h.gotB, delivered+n)
	acks := h.b.Stats().TxAck - acksBefore
	require.Greater(t, acks, uint64(burst), "the stop left no more ACKs than a burst: the test tests nothing")
	h.a.Poll(end) // the first poll after the stop
	st := h.a.Stats()
	t.Logf("RTO %v, %d ACKs waiting, burst %d: resent %d", rto, acks, burst, st.TxRetransmit-before.TxRetransmit)
	require.Equal(t, before.TxRetransmit, st.TxRetransmit, "resent packets whose ACKs waited in the ring")
	h.run(h.quiet, time.Second)
	require.Equal(t, before.TxRetransmit, h.a.Stats().TxRetransmit)
	require.Len(t, h.gotB, delivered+n, "delivered exactly once")
}
