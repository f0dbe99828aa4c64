package rt

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/wire"
)

// pausingPeer streams 64 B pushes from a to b with the window full while
// b's poll loop stops for pause out of every period (descheduled, as a
// loop on a loaded machine is), a polling every microsecond. It returns
// a's resends in the first and in the second half of the run.
func pausingPeer(t *testing.T, period, pause, run time.Duration) (first, second uint64) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	start := h.clk.Now()
	body := payload(1, 64)
	half := false
	for now := start; now.Sub(start) < run; now = now.Add(time.Microsecond) {
		require.NoError(t, h.clk.Set(now))
		for {
			if _, err := ca.Send(SendHeader{Type: wire.TypePushRequest}, body); err != nil {
				require.True(t, errors.Is(err, ErrBusy), "%v", err)
				break
			}
		}
		h.a.Poll(now)
		if now.Sub(start)%period < period-pause {
			h.b.Poll(now)
		}
		if !half && now.Sub(start) >= run/2 {
			half = true
			st := h.a.Stats()
			first = st.TxRetransmit + st.TxEarlyRetransmit
		}
	}
	h.run(h.quiet, time.Second)
	st := h.a.Stats()
	require.Positive(t, h.b.Stats().RxFrames)
	return first, st.TxRetransmit + st.TxEarlyRetransmit - first
}

// A receiver whose loop stops now and then for longer than the
// retransmit timeout (a shared machine deschedules it) must not cost a
// window of resends at every stop: once the peer's duplicate reports show
// the timeout fired for packets that were only waiting, the timeout
// covers such a stop. It did not: two endpoints in memory on the real
// clock resent hundreds of 64 B pushes with nothing lost.
func TestReceiverPausesCostNoResendsOnceLearnt(t *testing.T) {
	first, second := pausingPeer(t, 2*time.Millisecond, 300*time.Microsecond, 20*time.Millisecond)
	t.Logf("resends: %d in the first half, %d in the second", first, second)
	require.Zero(t, second, "resends after the first stops showed the timeout too short")
	require.LessOrEqual(t, first, uint64(4*DefaultWindowSize), "more than the first stops' windows of resends to learn it")
}

// A push whose ACK was lost: its timeout asks the peer, whose answer
// acknowledges the push — nothing is resent, and the timeout must not
// grow by the wait, which was no stall of the peer's. Taken as one, each
// lost ACK of a tail packet made the timeout longer by a quarter; and
// before the timeout asked, each cost a resend the peer already had.
func TestLostACKIsNoStall(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	h.run(func() bool { return ca.RTO() > 0 }, time.Second)
	lost := 0
	h.pb.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeAck && lost < 1 {
			lost++
			return 0 // the first ACK of the push
		}
		return 1
	}
	for i := range 5 {
		before := ca.RTO()
		lost = 0
		_, err := ca.Send(SendHeader{Type: wire.TypePushRequest, RSN: uint32(i)}, payload(uint64(i), 64))
		require.NoError(t, err)
		h.run(h.quiet, time.Second)
		require.Equal(t, 1, lost)
		require.LessOrEqual(t, ca.RTO(), before, "a lost ACK lengthened the timeout (push %d)", i)
	}
	st := h.a.Stats()
	require.EqualValues(t, 5, st.TimeoutAsks)
	require.EqualValues(t, 5, st.SpuriousRTO)
	require.Zero(t, st.TxRetransmit)
}

// A replayed ask for an ACK draws no stale echo: the answer to a
// timeout's ask echoes it (its RTT sample), so a copy of an old ask
// replayed to the peer would have the peer echo a time that old — a
// round trip of the replay's age in the sender's RTT estimate. The peer
// echoes an ask only when it is later than what it echoed last.
func TestReplayedAskDrawsNoStaleEcho(t *testing.T) {
	h := newHarness(t, nil)
	ca, _ := h.connect()
	var ask []byte
	var askTx uint32
	lost := 0
	h.pb.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeAck && lost == 0 {
			lost++
			return 0 // the push's ACK: its timeout asks
		}
		return 1
	}
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeAck && f.Header.Flags&wire.FlagAckRequested != 0 && ask == nil {
			ask, askTx = reencode(t, f), f.Header.TxTime
		}
		return 1
	}
	_, err := ca.Send(SendHeader{Type: wire.TypePushRequest, RSN: 1}, payload(1, 64))
	require.NoError(t, err)
	h.run(h.quiet, time.Second)
	require.NotNil(t, ask, "the timeout did not ask")
	require.EqualValues(t, 1, h.a.Stats().TimeoutAsks)
	h.sendAll(ca, wire.TypePushRequest, 2, 20, 64)
	h.run(h.quiet, time.Second)
	h.idle(50 * time.Millisecond) // the ask is now 50 ms old
	answers, stale := 0, 0
	h.pb.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypeAck {
			answers++
			if f.Header.TxEcho == askTx {
				stale++
			}
		}
		return 1
	}
	for range 3 {
		h.injectB(ask)
		h.run(h.quiet, time.Second)
	}
	require.Positive(t, answers, "the replayed ask was not answered at all")
	require.Zero(t, stale, "an answer echoed the replayed ask's time, 50 ms old")
}
