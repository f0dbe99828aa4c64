package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestOwnStallResendsNothing: both endpoints share one poll loop (or one
// core), and the loop is descheduled while the receiver holds a delayed
// ACK. When the loop runs again the sender is polled first: every timer
// of its window is long past due, but the ACK it waits for was held up by
// the same stall and comes in the same round, once the receiver runs.
// Nothing was lost, so nothing may be resent.
func TestOwnStallResendsNothing(t *testing.T) {
	for _, stall := range []time.Duration{500 * time.Microsecond, 5 * time.Millisecond, 50 * time.Millisecond} {
		t.Run(stall.String(), func(t *testing.T) {
			h := newHarness(t, nil)
			ca, _ := h.connect()
			h.idle(10 * time.Millisecond)
			for round := range 20 {
				// Fewer packets than AckEvery: the receiver's ACK waits
				// for its AckDelay timer.
				for i := range DefaultAckEvery - 1 {
					_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i)}, payload(uint64(round*8+i), 64))
					require.NoError(t, err)
				}
				h.poll() // a sends, b receives and arms its ACK timer
				require.NoError(t, h.clk.Set(h.clk.Now().Add(stall)))
				h.run(h.quiet, time.Second)
			}
			st := h.a.Stats()
			require.Zero(t, st.TxRetransmit+st.TxEarlyRetransmit, "resent %d+%d packets whose ACK the stall held up (SpuriousTimeout %d)",
				st.TxRetransmit, st.TxEarlyRetransmit, st.SpuriousTimeout)
		})
	}
}
