package rt

import (
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// rttEstimator keeps a connection's smoothed RTT and its retransmit
// timeout, after Jacobson and Karels (RFC 6298): the first sample sets
// SRTT = R and RTTVAR = R/2; later ones RTTVAR = 3/4 RTTVAR + 1/4 |SRTT-R|
// and SRTT = 7/8 SRTT + 1/8 R; RTO = SRTT + max(tick, 4 RTTVAR) + the
// receiver's ACK delay (the samples exclude the receiver's turnaround, the
// timer cannot), clamped to [MinRTO, MaxRTO].
//
// Karn's rule is applied where the sample is taken: a receiver echoes the
// timestamp of a packet only if it was not a retransmission, so no sample
// ever comes from an ambiguous packet.
type rttEstimator struct {
	srtt, rttvar time.Duration
	rto          time.Duration
	samples      uint64
	rack         rackState
	// stall is what spurious timeouts taught the timeout: a packet whose
	// timer fired was only waiting (the peer's duplicate report of the
	// resend, or an ACK too soon for it, shows the first copy arrived),
	// for this long from its send to its ACK — the peer's poll loop
	// descheduled, or its receive ring backed up. The timeout stays
	// longer than that, so the next such stall costs no window of
	// resends; it halves every stallHalfLife without a new one. RTT
	// samples alone cannot keep it: one per packet, RTTVAR forgets a
	// stall within a few dozen packets (RFC 4015 restores the timeout
	// from the spurious one's sample for the same reason).
	stall   time.Duration
	stallAt clock.Time
	// stallNext is the longest stall learnt since stallAt that was
	// shorter than stall: the floor of the next halving. A shorter stall
	// does not renew the longer one, which would then never wear off
	// while spurious timeouts keep coming (a lost ACK's is one).
	stallNext time.Duration
	// frto: per window, the retransmit timeout under test (frtoEpisode).
	frto [2]frtoEpisode
}

// frtoEpisode is a window's retransmit timeout whose verdict is not in
// yet (F-RTO, RFC 5682, with Eifel's response, RFC 4015). When a packet's
// timer expires only the window's oldest outstanding packet, the probe,
// is resent; every other timer of the window that expires meanwhile is
// held to the probe's next timeout, while the probe alone is resent at
// each of its own. The next ACK that acknowledges anything of the window
// decides: a packet sent before the timeout and never resent (or the
// probe's first copy: an ACK too soon for the resend) shows the timeout
// fired for packets that were only waiting — the peer's poll loop off its
// CPU — and nothing more is resent, the congestion response is taken
// back and the timeout covers the wait the ACK's RTT sample measured
// (rttEstimator.stalled); the probe's resend acknowledged alone is a
// loss, and the held packets are resent as every expiry used to be.
// Without it a receiver descheduled for longer than the RTO cost a whole
// window of resends, each one a copy the receiver already had.
//
// When nothing past the oldest packet has been acknowledged the timeout
// knows of no hole: the tail may be lost, or the peer's loop off its CPU
// with every packet in its ring. The first expiry then asks the peer for
// an ACK (an ACK with FlagAckRequested; it counts as one of the probe's
// transmissions) instead of resending: an answer acknowledging first
// copies makes the timeout spurious with nothing resent, an answer that
// echoes the ask and leaves the oldest missing is a loss (the probe and
// the held packets the answer still lacks are resent at once), and no
// answer by the probe's next timeout resends the probe as above. A tail
// loss costs one round trip more; a stalled peer costs no resend unless
// it stays off its CPU past the second timeout.
type frtoEpisode struct {
	at    clock.Time // when the timer expired; 0: no episode
	probe uint32     // the probe's PSN
	// orig: an ACK since acknowledged a packet's first copy sent before
	// at; probeAcked: the probe's resend was acknowledged.
	orig, probeAcked bool
	// asked: the timeout asked the peer for an ACK (askStamp, its
	// TxTime) in place of the probe's resend; answered: an ACK echoing
	// the ask, or something sent after it, arrived.
	asked, answered bool
	askStamp        uint32
}

// stallHalfLife is how long a learnt stall keeps the timeout up at full
// length.
const stallHalfLife = time.Second

func (r *rttEstimator) init(initial time.Duration) { *r = rttEstimator{rto: initial} }

func (r *rttEstimator) sample(rtt time.Duration, now clock.Time, o *Options) {
	if rtt < 0 {
		return
	}
	if r.stall > 0 && now.Sub(r.stallAt) >= stallHalfLife {
		r.stall = max(r.stall/2, r.stallNext)
		r.stallAt, r.stallNext = now, 0
	}
	if r.samples == 0 {
		r.srtt, r.rttvar = rtt, rtt/2
	} else {
		diff := r.srtt - rtt
		if diff < 0 {
			diff = -diff
		}
		r.rttvar = (3*r.rttvar + diff) / 4
		r.srtt = (7*r.srtt + rtt) / 8
	}
	r.samples++
	r.rto = min(max(r.srtt+max(o.TimerTick, 4*r.rttvar)+o.AckDelay, o.MinRTO, r.stall), o.MaxRTO)
}

// stalled learns from a spurious timeout: a packet that took took from
// its send to its ACK had its timer fire.
func (r *rttEstimator) stalled(took time.Duration, now clock.Time, o *Options) {
	if took <= 0 {
		return
	}
	if s := took + took/4; s >= r.stall {
		r.stall, r.stallAt, r.stallNext = s, now, 0
	} else {
		r.stallNext = max(r.stallNext, s)
	}
	r.rto = min(max(r.rto, r.stall), o.MaxRTO)
}

// backoff returns the timeout after n timeouts of one packet: RTO doubled
// n times, capped at max.
func (r *rttEstimator) backoff(n uint8, maxRTO time.Duration) time.Duration {
	d := r.rto
	for range min(n, 20) {
		d *= 2
		if d >= maxRTO {
			return maxRTO
		}
	}
	return min(d, maxRTO)
}

// rackState is a connection's time-based loss detection (RACK, RFC 8985):
// a hole is lost only when a packet sent after it was acknowledged and a
// reordering window has passed since, so a packet still on a slower path
// (spraying, IOI) is not taken for lost because packets on faster paths
// overtook it. See Endpoint.detectLoss.
type rackState struct {
	// minRTT is the least send-to-ACK time of a packet sent once (0: no
	// sample yet). It includes the receiver's ACK delay, as every RACK RTT
	// does.
	minRTT time.Duration
	// reo estimates how late reordered packets come: each acknowledged
	// packet that a later-sent one overtook gives its lateness (its RTT
	// minus the overtaking packet's). A sample above reo sets it; one
	// below pulls it down by 1/64 of the difference, and a packet nothing
	// overtook by 1/1024 of reo (inOrder): a slowly decaying maximum, so
	// the window follows the
	// path spread (and the queueing differences) the connection sees now.
	// It starts at the first RTT sample (assume a round trip of
	// reordering until the samples show less) and grows on evidence of a
	// spurious early resend.
	reo time.Duration
	// win holds, per window, the most recently sent packet acknowledged.
	win [2]rackMark
	// floor is what duplicate reports taught the window (wire.AckBody.Dup:
	// the peer had a packet we resent early, so the original was not
	// lost, only that late): the window stays at least this wide. It is
	// the lateness of the latest such original, and it wears down by
	// 1/4096 per packet acknowledged that nothing overtook, far more
	// slowly than reo, so that reordering which comes in bursts (a path
	// that stalls now and then, frames held back at random) is covered
	// between one burst and the next; RFC 8985 keeps its DSACK-widened
	// window for 16 recoveries for the same reason. It halves after
	// floorKeep early resends in a row that drew no report (needed).
	floor time.Duration
	// resent remembers the latest packets acknowledged after an early
	// resend, for the duplicate report that may follow their ACK (the
	// resend arrives after the original did): which window and PSN, and
	// how late the original was if it was what the ACK acknowledged.
	resent [32]resentRec
	nextRe uint8
	// tmo: the timer's latest resends acknowledged (rttEstimator.stall).
	tmo tmoRange
	// needed counts early resends that drew no duplicate report since
	// the floor last widened.
	needed uint8
}

// floorKeep is the early resends in a row found needed (no duplicate
// report) that halve the floor. Without it only acknowledgements of
// packets nothing overtook wore the floor down (1/4096 each), so where
// nearly every packet is overtaken or resent — a fabric that sprays a
// quarter of its frames into a dead path — a few late originals kept it
// for good, and every loss waited it out: ten times the round trip, half
// the goodput. RFC 8985 likewise drops its DSACK-widened window after 16
// recoveries without a DSACK.
const floorKeep = 32

// resentRec is one packet acknowledged after an early resend.
type resentRec struct {
	win  wire.Window // 0: free
	psn  uint32
	late time.Duration
}

// tmoRange is the timer's latest resends acknowledged, for the duplicate
// reports that may follow (a whole window's timers fire together when
// the peer's loop stalls, more than resent records): their window, the
// PSNs from lo to hi, the longest time from a first copy's send to its
// ACK among them, and when the latest was acknowledged.
type tmoRange struct {
	win    wire.Window // 0: none
	lo, hi uint32
	took   time.Duration
	at     clock.Time
	ack    uint64 // the connection's ACK count at the latest
}

// note adds packet psn of window w, acknowledged now after a timer's
// resend, took after its first copy was sent; a range older than gap
// starts again.
func (t *tmoRange) note(w wire.Window, psn uint32, took time.Duration, now clock.Time, gap time.Duration, ack uint64) {
	if t.win != w || now.Sub(t.at) > gap {
		*t = tmoRange{win: w, lo: psn, hi: psn, took: took, at: now, ack: ack}
		return
	}
	t.ack = ack
	if int32(psn-t.lo) < 0 {
		t.lo = psn
	}
	if int32(psn-t.hi) > 0 {
		t.hi = psn
	}
	t.took, t.at = max(t.took, took), now
}

// take reports (and forgets the range) whether packet psn of window w is
// in it, acknowledged by an ACK before ack (the connection's ACK count
// now), and the longest time its packets took. A report in the ACK that
// acknowledged them is no stall: the first copy's ACK was lost and the
// resend's ACK is the first the sender got, which a timeout is for.
func (t *tmoRange) take(w wire.Window, psn uint32, ack uint64) (time.Duration, bool) {
	if t.win == 0 || t.win != w || int32(psn-t.lo) < 0 || int32(psn-t.hi) > 0 || t.ack == ack {
		return 0, false
	}
	took := t.took
	*t = tmoRange{}
	return took, true
}

// noteResent remembers an acknowledged packet whose latest transmission
// was an early resend.
func (r *rackState) noteResent(w wire.Window, psn uint32, late time.Duration) {
	if r.resent[r.nextRe%uint8(len(r.resent))].win != 0 {
		// The record it replaces drew no duplicate report in the
		// len(resent) resends since: that resend was needed.
		if r.needed++; r.needed >= floorKeep {
			r.floor /= 2
			r.needed = 0
		}
	}
	r.resent[r.nextRe%uint8(len(r.resent))] = resentRec{win: w, psn: psn, late: late}
	r.nextRe++
}

// takeResent finds (and forgets) the record of packet psn of window w.
func (r *rackState) takeResent(w wire.Window, psn uint32) (time.Duration, bool) {
	for i := range r.resent {
		if x := &r.resent[i]; x.win == w && x.psn == psn {
			late := x.late
			*x = resentRec{}
			return late, true
		}
	}
	return 0, false
}

// widen raises the window's floor to cover a late original.
func (r *rackState) widen(late time.Duration) {
	r.floor = max(r.floor, late+late/4)
	r.needed = 0
}

// rackMark is the most recently sent acknowledged packet of a window
// (RFC 8985's RACK.xmit_ts, RACK.rtt and RACK.end_seq).
type rackMark struct {
	at     clock.Time    // when it was sent (the transmission acknowledged); 0: none yet
	rtt    time.Duration // from then until its ACK
	psn    uint32        // breaks ties between packets sent in one Poll
	resent bool          // the transmission acknowledged was a resend: packets with higher PSNs may have been sent before it
	// drainSent and drainAck: a packet sent at drainSent was acknowledged
	// at drainAck, and no packet sent earlier came since. A hole sent at
	// or after drainSent is not lost while packets sent with or before it
	// are still coming (a queue on its path draining: the packets of one
	// burst on one FIFO path come one serialisation time apart, later
	// than any RTT sample predicts); it is given the reordering window
	// after the last of them. Kept while such packets keep coming within
	// a reordering window of each other; then the next acknowledged
	// packet starts it again.
	drainSent, drainAck clock.Time
	// progress is when an ACK last acknowledged a packet of the window: a
	// packet's retransmit timeout runs from the later of its send and
	// this (RFC 6298 restarts its timer on every ACK of new data), so a
	// packet queued behind others that are still being acknowledged is
	// not resent because the queue outgrew the RTO. A lost packet is
	// found by the reordering rule once a later one is acknowledged; the
	// timeout is for the tail, when the ACKs stop. Per window, so that
	// a long stream in one window does not hold back the timeout of a
	// lost packet in the other.
	progress clock.Time
}

// drained notes that a packet sent at at was acknowledged now (see
// drainSent).
func (m *rackMark) drained(at, now clock.Time, wnd time.Duration) {
	if m.drainAck == 0 || at <= m.drainSent || now.Sub(m.drainAck) >= wnd {
		m.drainSent, m.drainAck = at, now
	}
}

// reoWnd is the reordering window: how long after the overtaking packet's
// RTT a hole is still given to arrive. At least minRTT/4 (RFC 8985); the
// lateness estimate plus a quarter for the samples not seen yet.
func (r *rackState) reoWnd() time.Duration {
	return max(r.minRTT/4, r.reo+r.reo/4, r.floor)
}

// lateness feeds the reordering estimate one sample (see reo).
func (r *rackState) lateness(l time.Duration) {
	l = max(l, 0)
	if l >= r.reo {
		r.reo = l
		return
	}
	r.reo -= (r.reo - l) / 64
}

// inOrder feeds the reordering estimate a packet that nothing overtook.
// It pulls the estimate down far more slowly than an overtaken packet's
// lateness does: on a sprayed connection most packets come in order, and
// counting each as a full sample of 0 wore the estimate away between one
// message's sprayed middle and the next, while the ordered path's queue
// (IOI's head and tail) was still as deep — on the real clock the demo
// resent four times as many packets early as the fabric lost.
func (r *rackState) inOrder() {
	r.reo -= r.reo / 1024
	r.floor -= r.floor / 4096
}

// tooSoon reports whether an ACK that came rtt after a packet's resend
// is too soon to be the resend's, so for an earlier copy (RFC 8985's
// test), against half the least RTT: the least RTT is of first copies,
// which the receiver acknowledges together and which queue behind each
// other, while a lone resend that fills a hole is acknowledged at once on
// a path its window has left idle — in memory 1.0 µs against a least of
// 1.24. Taken as too soon, such a needed resend was called spurious and
// its hole's whole wait widened the reordering window, a quarter more at
// each hole (rackAcked). Without duplicate reports (noDup) the test is
// against the least RTT itself, as it was before them.
func (r *rackState) tooSoon(rtt time.Duration, noDup bool) bool {
	if noDup {
		return r.minRTT > 0 && rtt < r.minRTT
	}
	return r.minRTT > 0 && rtt < r.minRTT/2
}

// overtaken reports whether a packet sent at at with PSN psn was sent
// before the window's mark, i.e. a packet sent after it was acknowledged.
func (m *rackMark) overtaken(at clock.Time, psn uint32) bool {
	return m.at != 0 && (at < m.at || at == m.at && int32(psn-m.psn) < 0)
}
