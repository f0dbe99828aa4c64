package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt/swift"
	"github.com/peregrine-net/peregrine/core/wire"
)

// frtoHarness is a pair whose initiator runs Swift with a window wide
// enough for a test's whole burst, returning its controller. Its delay
// target is far above any delay here, so the window moves on timeouts
// alone (the RTT a stall's ACK carries is a delay signal of its own).
func frtoHarness(t *testing.T) (*harness, *Conn, *swift.Controller) {
	return frtoHarnessWith(t, nil)
}

// frtoHarnessWith is frtoHarness with the initiator's options tweaked
// further.
func frtoHarnessWith(t *testing.T, tweak func(a *Options)) (*harness, *Conn, *swift.Controller) {
	var sw *swift.Controller
	h := newHarness(t, func(a, _ *Options) {
		if tweak != nil {
			tweak(a)
		}
		a.Congestion = func() CongestionControl {
			p := swift.DefaultParams()
			p.InitialCwnd = 128
			p.BaseTarget = 10 * time.Millisecond
			sw = &swift.Controller{}
			require.NoError(t, sw.Init(p))
			return sw
		}
	})
	ca, _ := h.connect()
	h.sendAll(ca, wire.TypePushUnsolicitedData, 0, 200, 64) // RTT samples: the timeout is the estimator's
	h.run(h.quiet, time.Second)
	return h, ca, sw
}

// pollAlone polls only a from now until end, jumping to a's deadlines:
// b's loop is off its CPU.
func (h *harness) pollAlone(end clock.Time) { h.pollOnly(h.a, end) }

// pollOnly polls e alone from now until end, jumping to its deadlines: the
// other end's loop is off its CPU.
func (h *harness) pollOnly(e *Endpoint, end clock.Time) {
	for now := h.clk.Now(); now < end; {
		if e.Poll(now) > 0 {
			continue
		}
		next, ok := e.NextDeadline()
		if !ok || next > end {
			break
		}
		now = max(next, now.Add(time.Microsecond))
		require.NoError(h.t, h.clk.Set(now))
	}
	require.NoError(h.t, h.clk.Set(end))
}

// A receiver whose loop stops for five timeouts with 64 packets of ours
// outstanding, then runs again, lost nothing: the timeout may cost one
// resend per expiry (the probe), not the window, and the first ACK after
// the stop, acknowledging packets sent once, shows the timeout spurious —
// the congestion window is what it was, and the timeout covers such a
// stop from then on (its RTT sample spans it). Every timer used to resend its
// packet: 64 copies per expiry, each one the receiver had.
func TestStalledPeerCostsOneProbePerTimeout(t *testing.T) {
	h, ca, sw := frtoHarness(t)
	const n = 64
	before, rto, delivered := sw.Cwnd(), ca.RTO(), len(h.gotB)
	require.GreaterOrEqual(t, before, float64(n))
	for i := range n {
		_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i)}, payload(uint64(1000+i), 64))
		require.NoError(t, err)
	}
	h.pollAlone(h.clk.Now().Add(5 * rto))
	// Expiries of one timer in five timeouts: at 1, 3 (doubling), 7 > 5.
	expiries := 0
	for at, d := rto, rto; at <= 5*rto; d, at = 2*d, at+2*d {
		expiries++
	}
	mid := h.a.Stats()
	require.Positive(t, mid.TxRetransmit, "no timer expired in the stop")
	h.run(h.quiet, time.Second)
	st := h.a.Stats()
	t.Logf("RTO %v: resent %d (%d during the stop), spurious timeouts %d, cwnd %.1f -> %.1f", rto,
		st.TxRetransmit, mid.TxRetransmit, st.SpuriousRTO, before, sw.Cwnd())
	require.LessOrEqual(t, st.TxRetransmit, uint64(expiries), "more than one resend per expiry")
	require.Zero(t, st.TxEarlyRetransmit)
	require.EqualValues(t, 1, st.SpuriousRTO)
	require.GreaterOrEqual(t, sw.Cwnd(), before, "the spurious timeout's window cut stayed")
	require.EqualValues(t, 1, sw.Stats().TimeoutUndos)
	require.GreaterOrEqual(t, ca.RTO(), 5*rto, "the timeout does not cover the stop it just saw")
	require.Len(t, h.gotB, delivered+n, "delivered exactly once")
	require.Zero(t, st.Internal+h.b.Stats().Internal)
}

// Real loss of a burst in the middle of a window and of the window's tail
// is still recovered: the probe's resend acknowledged without any first
// copy sent before the timeout is a loss, and the held packets go at
// once; every packet is delivered exactly once.
func TestFRTORecoversBurstLoss(t *testing.T) {
	h, ca, sw := frtoHarness(t)
	const n = 64
	delivered := len(h.gotB)
	first := uint32(0)
	dropped := map[uint32]bool{}
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type != wire.TypePushUnsolicitedData || f.Header.Flags&wire.FlagRetransmission != 0 {
			return 1
		}
		if off := f.Header.PSN - first; off >= 20 && off < 26 || off >= n-8 {
			dropped[f.Header.PSN] = true
			return 0
		}
		return 1
	}
	psns := h.sendAll(ca, wire.TypePushUnsolicitedData, 5000, 1, 64)
	first = psns[0]
	h.sendAll(ca, wire.TypePushUnsolicitedData, 5001, n-1, 64)
	h.run(h.quiet, time.Second)
	st := h.a.Stats()
	t.Logf("dropped %d, resent %d+%d early, spurious timeouts %d, cwnd %.1f", len(dropped), st.TxRetransmit, st.TxEarlyRetransmit, st.SpuriousRTO, sw.Cwnd())
	require.Len(t, dropped, 6+8)
	require.Zero(t, st.SpuriousRTO, "a real loss taken for a stall")
	require.Len(t, h.gotB, delivered+n, "delivered exactly once")
	seen := map[uint64]bool{}
	for _, d := range h.gotB[delivered:] {
		require.False(t, seen[d.seq], "seq %d twice", d.seq)
		seen[d.seq] = true
	}
	require.Zero(t, st.Internal+h.b.Stats().Internal)
}

// Both loops stop while the sender's oldest packet is a hole (the ACKs
// that came before the stop showed it) and its reordering timer is
// armed. When the sender's loop runs again, that timer finds the
// retransmit timeout due as well, and the timers of the packets sent
// after the hole, which the stalled peer holds, expire with it. The
// hole's resend is the timeout's probe: the other expiries are held for
// its verdict, not each resent. Each used to be — the hole's timer went
// out as a plain timeout, and with the oldest packet queued no later
// expiry started F-RTO: a window of resends the peer had.
func TestLateHoleIsTheTimeoutsProbe(t *testing.T) {
	h, ca, _ := frtoHarness(t)
	dropped := false
	h.pa.tap = func(f *wire.Frame) int {
		if !dropped && f.Header.Type == wire.TypePushUnsolicitedData {
			dropped = true
			return 0
		}
		return 1
	}
	const half = 32
	send := func(from int) {
		for i := from; i < from+half; i++ {
			_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i)}, payload(uint64(7000+i), 64))
			require.NoError(t, err)
		}
	}
	send(0)
	now := h.clk.Now()
	h.a.Poll(now)
	h.pollOnly(h.b, now.Add(50*time.Microsecond)) // b acknowledges all but the hole
	send(half)
	h.a.Poll(h.clk.Now()) // a learns of the hole, sends the second half; b is off its CPU
	rto := ca.RTO()
	require.NoError(t, h.clk.Set(h.clk.Now().Add(3*rto))) // and so is a
	h.a.Poll(h.clk.Now())
	mid := h.a.Stats()
	h.run(h.quiet, time.Second)
	st := h.a.Stats()
	t.Logf("RTO %v: resent %d by timer (%d when a ran again) and %d early, spurious timeouts %d", rto, st.TxRetransmit, mid.TxRetransmit, st.TxEarlyRetransmit, st.SpuriousRTO)
	require.Positive(t, mid.TxEarlyRetransmit+mid.TxRetransmit, "the hole went out when a ran again")
	require.LessOrEqual(t, st.TxRetransmit+st.TxEarlyRetransmit, uint64(2), "the peer's packets were resent")
	require.Zero(t, st.Internal+h.b.Stats().Internal)
}

// A receiver whose loop stops for two and a half timeouts with 64
// packets of ours outstanding lost nothing, and the timeout knows of no
// hole (nothing past the oldest packet was acknowledged): its first
// expiry asks the peer for an ACK instead of resending, and the stop ends
// before the second. Nothing is resent; the answer acknowledges first
// copies, so the timeout was spurious and its window cut is taken back.
// The oldest packet's resend, the probe, used to go at the first expiry:
// a copy the peer already had, one per stop of the peer's loop.
func TestShortPeerStallCostsNoResend(t *testing.T) {
	h, ca, sw := frtoHarness(t)
	const n = 64
	before, rto, delivered := sw.Cwnd(), ca.RTO(), len(h.gotB)
	for i := range n {
		_, err := ca.Send(SendHeader{Type: wire.TypePushUnsolicitedData, RSN: uint32(i)}, payload(uint64(3000+i), 64))
		require.NoError(t, err)
	}
	h.pollAlone(h.clk.Now().Add(5 * rto / 2))
	mid := h.a.Stats()
	require.EqualValues(t, 1, mid.TimeoutAsks, "the first expiry did not ask")
	h.run(h.quiet, time.Second)
	st := h.a.Stats()
	t.Logf("RTO %v: asks %d, resent %d+%d early, spurious timeouts %d, cwnd %.1f -> %.1f", rto,
		st.TimeoutAsks, st.TxRetransmit, st.TxEarlyRetransmit, st.SpuriousRTO, before, sw.Cwnd())
	require.Zero(t, st.TxRetransmit+st.TxEarlyRetransmit, "a copy the peer had was resent")
	require.EqualValues(t, 1, st.SpuriousRTO)
	require.EqualValues(t, 1, sw.Stats().TimeoutUndos)
	require.GreaterOrEqual(t, sw.Cwnd(), before, "the spurious timeout's window cut stayed")
	require.Len(t, h.gotB, delivered+n, "delivered exactly once")
	require.Zero(t, st.Internal+h.b.Stats().Internal)
}

// The last packets of a burst are lost and nothing follows them: the
// timeout asks, and the peer's answer, which echoes the ask and still
// lacks them, is the loss — they are resent on it, one round trip after
// the ask, not at the probe's next timeout (two timeouts later).
func TestAskedTailLossIsResentAtTheAnswer(t *testing.T) {
	h, ca, _ := frtoHarness(t)
	const n, lost = 16, 4
	delivered := len(h.gotB)
	first, dropped := uint32(0), 0
	h.pa.tap = func(f *wire.Frame) int {
		if f.Header.Type == wire.TypePushUnsolicitedData && f.Header.Flags&wire.FlagRetransmission == 0 && f.Header.PSN-first >= n-lost {
			dropped++
			return 0
		}
		return 1
	}
	psns := h.sendAll(ca, wire.TypePushUnsolicitedData, 9000, 1, 64)
	first = psns[0]
	rto, start := ca.RTO(), h.clk.Now()
	h.sendAll(ca, wire.TypePushUnsolicitedData, 9001, n-1, 64)
	h.run(func() bool { return len(h.gotB) == delivered+n }, time.Second)
	took := h.clk.Now().Sub(start)
	h.run(h.quiet, time.Second)
	st := h.a.Stats()
	t.Logf("RTO %v: the tail delivered %v after the burst; asks %d, resent %d+%d early, spurious timeouts %d",
		rto, took, st.TimeoutAsks, st.TxRetransmit, st.TxEarlyRetransmit, st.SpuriousRTO)
	require.Equal(t, lost, dropped)
	require.EqualValues(t, 1, st.TimeoutAsks)
	require.Zero(t, st.SpuriousRTO, "a real loss taken for a stall")
	require.EqualValues(t, lost, st.TxRetransmit+st.TxEarlyRetransmit, "only the lost tail resent")
	require.Less(t, took, 2*rto, "the tail waited for the probe's next timeout")
	require.Len(t, h.gotB, delivered+n, "delivered exactly once")
	require.Zero(t, st.Internal+h.b.Stats().Internal)
}
