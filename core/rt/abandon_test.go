package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// Conn.Abandon gives up the packets of one cookie at once: each becomes a
// resync in place (a packet never sent goes out as one; one sent already
// is resent as one now, flagged as a retransmission), the caller's stable
// payload is never read again, the peer's deliver function never sees
// them, and each cookie comes back exactly once, in EventAbandoned, when
// the peer acknowledges its resync; other cookies are untouched. Sends per
// PSN stay within the packet's and its resync's retry budgets.
func TestAbandonByCookie(t *testing.T) {
	h := newHarness(t, func(a, _ *Options) { a.RetryLimit = 3 })
	ca, _ := h.connect()
	h.idle(time.Millisecond)
	acked := map[uint64]int{}
	setAcked(h.a, func(_ *Conn, _ wire.Window, _ uint32, cookie uint64) { acked[cookie]++ })

	// The peer hears nothing for now.
	sends := map[uint32]int{}
	var after []wire.Header // what a sends once the packets were given up
	given, back := false, false
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type.Window() != wire.WindowNone || f.Header.Type == wire.TypeResync {
			sends[f.Header.PSN]++
			if given {
				after = append(after, f.Header)
			}
		}
		if back {
			return 1
		}
		return 0
	}
	bufs := [][]byte{payload(1, 64), payload(2, 64), payload(3, 64), payload(4, 64)}
	var psns []uint32
	for i, b := range bufs {
		cookie := uint64(7)
		if i == 3 {
			cookie = 8
		}
		psn, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i), Cookie: cookie, PayloadStable: true}, b)
		require.NoError(t, err)
		psns = append(psns, psn)
		if i == 1 {
			h.poll() // the first two are sent, the third is not yet
		}
	}
	require.Equal(t, 1, sends[psns[0]])
	require.Zero(t, sends[psns[2]], "the third packet was never sent")

	require.Zero(t, ca.Abandon(0, 0, wire.ResyncTimeout), "cookie 0 names nothing")
	require.Equal(t, 3, ca.Abandon(7, 0, wire.ResyncTimeout))
	require.Zero(t, ca.Abandon(7, 0, wire.ResyncTimeout), "given up already")
	require.Equal(t, 4, ca.Outstanding(wire.WindowRequest), "their PSNs stay outstanding until the resyncs are acknowledged")
	given = true
	for _, b := range bufs[:3] {
		clear(b) // the caller's again: never read from now on
	}
	h.poll()
	require.Equal(t, uint64(3), h.a.Stats().GivenUp)
	for _, hd := range after {
		if hd.PSN == psns[3] {
			continue
		}
		require.Equal(t, wire.TypeResync, hd.Type, "PSN %d sent as %v after it was given up", hd.PSN, hd.Type)
		require.Equal(t, wire.ResyncTimeout, hd.Resync.Code)
		require.Equal(t, wire.TypePushUnsolicitedData, hd.Resync.OrigType)
		if hd.PSN != psns[2] {
			require.True(t, hd.Flags.Has(wire.FlagRetransmission), "a resend is flagged as one (Karn's rule)")
		}
	}
	require.NotEmpty(t, after)

	// The peer is back.
	back = true
	h.run(func() bool { return h.quiet() && ca.Outstanding(wire.WindowRequest) == 0 }, time.Second)
	abandoned := map[uint64]int{}
	for _, ev := range eventsOf(h.evA, EventAbandoned) {
		abandoned[ev.Cookie]++
	}
	require.Equal(t, map[uint64]int{7: 3}, abandoned, "each given-up packet's cookie comes back once")
	require.Equal(t, map[uint64]int{8: 1}, acked, "the other cookie's packet was delivered and acknowledged")
	require.Len(t, h.gotB, 1, "the peer's deliver function saw only the packet not given up")
	require.Equal(t, psns[3], h.gotB[0].psn, "the fourth packet")
	require.Equal(t, uint64(3), h.b.Stats().RxResync)
	for _, psn := range psns {
		require.LessOrEqual(t, sends[psn], 2*(3+1), "PSN %d: the packet's and its resync's budgets", psn)
	}
	require.Equal(t, StateEstablished, ca.State())
	require.Zero(t, h.a.Stats().Internal)
	_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, Cookie: 9, PayloadStable: true}, bufs[0])
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(100, func() { ca.Abandon(12345, 0, wire.ResyncTimeout) }), "Abandon does not allocate")

	ca.Abort()
	require.Zero(t, ca.Abandon(8, 0, wire.ResyncAborted), "a connection that ended gives up nothing")
}
