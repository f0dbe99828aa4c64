package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// TestOutOfWindowRefusalKeepsRetries: a packet the receiver refuses as out
// of window (it came too far ahead, it was not lost) more times than the
// retry limit allows resends is still delivered and acknowledged, never
// abandoned: the refusals give their transmissions back (Refunds). A
// receiver-not-ready refusal, by contrast, spends the budget as before;
// and a peer that refuses forever gets at most 2×(RetryLimit+1)
// transmissions before the packet is given up.
func TestOutOfWindowRefusalKeepsRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		verdict   Verdict
		refusals  int
		abandoned bool
	}{
		{"out-of-window", OutOfWindow, 6, false},
		{"not-ready", NotReady, 6, true},
		{"out-of-window-forever", OutOfWindow, 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 3
			h := newHarness(t, func(a, b *Options) {
				a.RetryLimit, b.RetryLimit = limit, limit
				a.MinRTO, b.MinRTO = time.Millisecond, time.Millisecond
				a.RNRTimeout, b.RNRTimeout = time.Millisecond, time.Millisecond
			})
			refused := 0
			setDeliver(h.b, func(c *Conn, hd *wire.Header, p []byte) Verdict {
				if refused < tc.refusals {
					refused++
					return tc.verdict
				}
				h.gotB = append(h.gotB, record(c, hd, p))
				return Accept
			})
			ca, _ := h.connect()
			_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, Cookie: 7}, payload(1, 100))
			require.NoError(t, err)
			h.run(func() bool { return h.a.Outstanding() == 0 }, 10*time.Second)
			ab := eventsOf(h.evA, EventAbandoned)
			st := h.a.Stats()
			if tc.abandoned {
				require.Len(t, ab, 1, "given up")
				require.LessOrEqual(t, st.TxData+st.TxRetransmit+st.TxEarlyRetransmit-st.ResyncSent, uint64(2*(limit+1)))
				return
			}
			require.Empty(t, ab, "an out-of-window refusal does not spend the retry budget")
			require.Len(t, h.gotB, 1, "delivered once")
			require.EqualValues(t, min(tc.refusals, limit), st.Refunds, "at most RetryLimit refunds")
		})
	}
}
