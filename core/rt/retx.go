package rt

import (
	"math/bits"
	"time"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

// retxCtx is the retransmission engine's context of one outstanding
// packet, in the slot the CAM's entry index selects.
type retxCtx struct {
	frame    mbuf.Handle // the retained frame; every transmission sends a copy
	payload  []byte      // SendHeader.PayloadStable: the frame holds only the headers
	cookie   uint64      // SendHeader.Cookie, handed back when the packet resolves
	conn     int32
	win      wire.Window
	psn      uint32
	sentAt   clock.Time // latest transmission
	timer    clock.TimerID
	push     bool   // a push's data: nothing on the wire answers it but the ACK
	sends    uint16 // transmissions so far, packet and resync (saturates: never wraps to "first")
	tx       uint16 // transmissions of the current frame (the packet, then its resync)
	timeouts uint16 // timer expiries since the packet (or its resync) was built
	// holdUntil: the peer asked us not to resend before then (an RNR or
	// out-of-window NACK); early retransmission waits too.
	holdUntil clock.Time
	// prevAt is when the transmission before the latest was sent, if the
	// latest is a resend: an ACK too soon for the latest acknowledges that
	// one (the resend was spurious). earlyDecl: the latest resend was an
	// early one (detectLoss), not the timer's.
	prevAt    clock.Time
	earlyDecl bool
	// rackDue: the timer is armed for the reordering window's end
	// (detectLoss), not for the retransmit timeout; 0 when it is not.
	rackDue clock.Time
	early   bool // queued as an early retransmit
	held    bool // its timer expired during its window's F-RTO episode and waits for the verdict (frtoHold)
	resync  bool // the frame is a resync standing in for the abandoned packet
	nacked  bool // the resync stands in for a packet the peer's ULP refused
	// refunds: transmissions given back because the peer refused them as
	// out of window (refund), at most RetryLimit.
	refunds uint16

	// route: how its transmissions are steered over the paths (paths.go).
	route uint8
}

// releaseCtx frees a context whose CAM entry was deleted.
func (e *Endpoint) releaseCtx(idx uint32) {
	x := &e.ctx[idx]
	if x.timer != clock.NoTimer {
		e.wheel.Cancel(x.timer)
	}
	e.newQ.remove(int32(idx))
	e.retxQ.remove(int32(idx))
	if x.frame != mbuf.NoHandle {
		e.freeFrame(x.frame)
	}
	*x = retxCtx{frame: mbuf.NoHandle}
}

// Timer kinds, in the high half of a wheel timer's data word; the low half
// is a context or connection index.
const (
	timerRetx = 1 + iota
	timerAck
	timerCtrl
)

// onTimer is the wheel's fire callback.
func (e *Endpoint) onTimer(id clock.TimerID, data uint64) {
	idx := int32(uint32(data))
	switch data >> 32 {
	case timerRetx:
		x := &e.ctx[idx]
		if x.timer != id {
			return
		}
		x.timer = clock.NoTimer
		switch {
		case x.rackDue != 0:
			// A reordering window's end that found the timeout due as
			// well (a loop that ran late) is that timeout, F-RTO's like
			// any other: handled as a plain one, it started no episode,
			// and with the oldest packet queued no later expiry could.
			x.rackDue = 0
			if e.onRackTimer(uint32(idx), x) {
				return
			}
		case x.holdUntil == 0 || e.now < x.holdUntil:
			// Not the end of a peer's hold-off: the timeout runs from the
			// last ACK that made progress (rtoDue).
			if due := e.rtoDue(&e.conns[x.conn], x); e.now < due {
				e.armRetx(uint32(idx), x, due)
				return
			}
		default:
			e.onRetxTimeout(uint32(idx), x)
			return
		}
		if e.frtoHold(uint32(idx), x) {
			return
		}
		e.onRetxTimeout(uint32(idx), x)
	case timerAck:
		c := &e.conns[idx]
		if c.ackTimer != id {
			return
		}
		c.ackTimer = clock.NoTimer
		c.ackNow = true
		e.ackQ.push(c.idx)
	case timerCtrl:
		c := &e.conns[idx]
		if c.ctrlTimer != id {
			return
		}
		c.ctrlTimer = clock.NoTimer
		e.onCtrlTimeout(c)
	}
}

func (e *Endpoint) armRetx(idx uint32, x *retxCtx, at clock.Time) {
	x.rackDue = 0
	if x.timer != clock.NoTimer {
		if e.wheel.Rearm(x.timer, at) == nil {
			return
		}
	}
	id, err := e.wheel.Arm(at, uint64(timerRetx)<<32|uint64(idx))
	if err != nil {
		e.cnt.own[cInternal]++
		id = clock.NoTimer
	}
	x.timer = id
}

// onRetxTimeout handles a packet's retransmit timer: queue a resend, or
// once the frame was sent RetryLimit+1 times (by its timer, after an RNR
// back-off or early: every resend counts) and its timer expired
// RetryLimit+1 times put a resync in its place, or past the resync's
// limit fail the connection. Early resends spend transmissions sooner than
// the timer would; the timer still runs its whole schedule (RTO doubled
// per expiry) before the packet is given up, so early retransmission
// never abandons a packet sooner than the timer alone would have: one
// whose ACK is merely slow (a slow path, a queue) is acknowledged first.
func (e *Endpoint) onRetxTimeout(idx uint32, x *retxCtx) {
	c := &e.conns[x.conn]
	x.timeouts++
	if e.retriesSpent(x) {
		if c.state == StateClosing && c.peerClosed() && c.tx[0].outstanding == 1 && c.tx[1].outstanding == 0 &&
			wire.HeaderView(e.pool.Data(x.frame)[c.hdrOff:]).Type() == wire.TypeConnClose {
			e.closeUnacked(c)
			return
		}
		if int(x.timeouts) <= e.opts.RetryLimit {
			// No transmission left, but the timer's schedule is not over:
			// wait it out without sending.
			e.armRetx(idx, x, e.now.Add(c.rtt.backoff(uint8(min(x.timeouts, 255)), e.opts.MaxRTO)))
			return
		}
		if x.resync {
			e.failConn(c, ErrRetryExhausted)
			return
		}
		e.startResync(idx, x, c, wire.ResyncRetryExhausted)
		return
	}
	c.cc.OnRetransmit(e.now, true)
	x.early, x.held = false, false
	x.prevAt, x.earlyDecl = x.sentAt, false
	e.retxQ.push(int32(idx))
}

// frtoHold applies F-RTO (frtoEpisode) to the expiry of packet x's
// retransmit timer, which is due: it reports true if the expiry is held
// (nothing is sent for it now), false if the caller handles it as a
// timeout. The first expiry in a window starts an episode: its oldest
// outstanding packet is resent alone, as the probe, and every other
// expiry is held to the probe's next timeout, again and again while
// nothing is acknowledged — a silent peer gets one packet per timeout
// (the probe, its timer doubling), as TCP's window of one after a
// timeout does; the first ACK decides (frtoVerdict). Outside the rule
// stay the packets whose expiry is no plain timeout or whose resend would
// not be one: before the connection is established (its setup must not
// wait on a probe), while it closes (ConnClose keeps its own retry rule),
// a resync, a packet past its retries, and one the peer asked to hold off
// (an RNR or out-of-window NACK: the peer has it or refused it). A probe
// that leaves the rule ends the episode as a loss.
func (e *Endpoint) frtoHold(idx uint32, x *retxCtx) bool {
	c := &e.conns[x.conn]
	k := c.window(x.win)
	f := &c.rtt.frto[k]
	if c.state != StateEstablished || !frtoEligible(e, x) {
		if f.at != 0 && x.psn == f.probe {
			x.held = false
			e.frtoEnd(c, k, false)
		}
		return false
	}
	if f.at != 0 {
		if x.psn == f.probe {
			return false // resent again, alone
		}
		pidx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(x.win), PSN: f.probe})
		if !ok || !frtoEligible(e, &e.ctx[pidx]) {
			x.held = false
			e.frtoEnd(c, k, false)
			return false
		}
		e.frtoHoldTo(c, idx, x, pidx, &e.ctx[pidx])
		return true
	}
	pidx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(x.win), PSN: c.tx[k].bsn})
	if !ok {
		return false // ConnClose's retry state, or a bug counted elsewhere
	}
	p := &e.ctx[pidx]
	if !frtoEligible(e, p) || e.retxQ.contains(int32(pidx)) {
		return false // the oldest is no probe, or already going out
	}
	*f = frtoEpisode{at: e.now, probe: p.psn}
	if c.tx[k].acked.span() == 0 && p.sends == 1 && p.timeouts == 0 {
		// No hole known, and the probe never timed out before (after
		// an answer showed it missing, asking again tells nothing): ask
		// before resending (frtoEpisode).
		e.askPeer(c, f, pidx, p)
		if pidx != idx {
			e.frtoHoldTo(c, idx, x, pidx, p)
		}
		return true
	}
	if pidx == idx {
		return false
	}
	e.onRetxTimeout(pidx, p)
	e.frtoHoldTo(c, idx, x, pidx, p)
	return true
}

// askPeer starts episode f with an ask in place of the probe's resend:
// the ACK asking for an ACK goes out in this Poll, and probe p (context
// pidx) is held until its next timeout, that expiry and the transmission
// spent as a resend would have spent them, so a dead peer is given up on
// the same schedule. The congestion response is a timeout's, taken back
// if the answer shows the timeout spurious.
func (e *Endpoint) askPeer(c *conn, f *frtoEpisode, pidx uint32, p *retxCtx) {
	f.asked, f.askStamp = true, e.now32
	c.cc.OnRetransmit(e.now, true)
	if p.timeouts < ^uint16(0) {
		p.timeouts++
	}
	if p.tx < ^uint16(0) {
		p.tx++
	}
	p.early, p.held = false, true
	e.armRetx(pidx, p, e.now.Add(c.rtt.backoff(uint8(min(p.timeouts, 255)), e.opts.MaxRTO)))
	c.probe = true
	if !c.ackNow {
		e.ackNow(c)
	}
	e.cnt.own[cTimeoutAsks]++
}

// asking reports whether p is the probe of episode f that was asked for
// and not resent since.
func asking(f *frtoEpisode, p *retxCtx) bool {
	return f.asked && f.at != 0 && p.psn == f.probe && p.sentAt < f.at
}

// frtoHoldTo holds packet x until the next timeout of probe p (context
// pidx): the one its resend will arm if p is queued for it or due now (its
// timer fires in this Poll). x keeps a timer, so no held packet is ever
// left without one.
func (e *Endpoint) frtoHoldTo(c *conn, idx uint32, x *retxCtx, pidx uint32, p *retxCtx) {
	n := p.timeouts
	due := e.rtoDue(c, p)
	if f := &c.rtt.frto[c.window(p.win)]; asking(f, p) {
		due = max(due, f.at.Add(c.rtt.backoff(uint8(min(n, 255)), e.opts.MaxRTO))) // the ask's next timeout
	}
	switch {
	case e.retxQ.contains(int32(pidx)):
		due = e.now.Add(c.rtt.backoff(uint8(min(n, 255)), e.opts.MaxRTO))
	case due <= e.now:
		due = e.now.Add(c.rtt.backoff(uint8(min(n+1, 255)), e.opts.MaxRTO))
	}
	x.held = true
	e.armRetx(idx, x, due)
}

// frtoEligible reports whether packet x's timeout may be tested by F-RTO
// (frtoHold).
func frtoEligible(e *Endpoint, x *retxCtx) bool {
	return x.sends > 0 && !x.resync && x.holdUntil == 0 && !e.retriesSpent(x)
}

// frtoVerdict ends window k's timeout under test once an ACK brought
// evidence (rackAcked): an acknowledged first copy sent before the
// timeout makes it spurious, the probe's resend acknowledged alone a loss.
func (e *Endpoint) frtoVerdict(c *conn, k int, rtt time.Duration) {
	f := &c.rtt.frto[k]
	switch {
	case f.at == 0:
	case f.orig:
		e.cnt.own[cSpuriousRTO]++
		if u, ok := c.cc.(TimeoutUndoer); ok {
			u.UndoTimeout(e.now)
		}
		// RFC 4015's response: the timeout covers the wait just seen,
		// as the ACK's RTT sample measures it (rttEstimator.stall, which
		// wears off by halves). The sample echoes the latest first copy
		// the peer took, so after its loop stalled it spans the stall,
		// while an original acknowledged late because its first ACK was
		// lost gives no long one: the time the packet waited would
		// ratchet the timeout up by each wait on a lossy ACK path.
		c.rtt.stalled(rtt, e.now, &e.opts)
		e.frtoEnd(c, k, true)
	case f.probeAcked, f.answered:
		e.frtoEnd(c, k, false)
	}
}

// frtoEnd ends window k's episode and releases its held packets: with a
// spurious timeout each one's timer runs again from the ACK that showed
// it (rtoDue), otherwise each expiry is handled as the timeout it was.
func (e *Endpoint) frtoEnd(c *conn, k int, spurious bool) {
	f := c.rtt.frto[k]
	c.rtt.frto[k] = frtoEpisode{}
	e.eachOutstanding(c, k, func(idx uint32, x *retxCtx) bool {
		if !x.held {
			return true
		}
		x.held = false
		switch {
		case spurious:
			e.armRetx(idx, x, e.rtoDue(c, x))
		case asking(&f, x):
			// Its expiry and the timeout's response were spent on the
			// ask: resent now, on them, unless that was its last
			// transmission (its timer, armed, runs out the schedule).
			if !e.retriesSpent(x) {
				x.early = false
				x.prevAt, x.earlyDecl = x.sentAt, false
				e.retxQ.push(int32(idx))
			}
		default:
			e.onRetxTimeout(idx, x)
		}
		return true
	})
}

// eachOutstanding calls fn with the context of every unacknowledged PSN
// of window k of c, oldest first, until fn returns false; a PSN with no
// context (ConnClose's retry state, or a bug counted elsewhere) is
// passed over. fn does not escape, so the call allocates nothing.
func (e *Endpoint) eachOutstanding(c *conn, k int, fn func(idx uint32, x *retxCtx) bool) {
	tw := &c.tx[k]
	w := wire.Window(k + 1)
	for i := range tw.acked {
		z := ^tw.acked[i] & lowMask(i, tw.inFlight())
		for z != 0 {
			b := uint32(bits.TrailingZeros64(z))
			z &= z - 1
			idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: tw.bsn + uint32(i)*64 + b})
			if ok && !fn(idx, &e.ctx[idx]) {
				return
			}
		}
	}
}

// startResync replaces an abandoned packet by a resync with the same PSN,
// so that the receiver's window can move past it.
func (e *Endpoint) startResync(idx uint32, x *retxCtx, c *conn, code wire.ResyncCode) {
	f := e.allocFrame()
	if f == mbuf.NoHandle {
		// Try again once the pool has room.
		x.timeouts--
		e.armRetx(idx, x, e.now.Add(e.opts.MinRTO))
		return
	}
	orig := wire.HeaderView(e.pool.Data(x.frame)[c.hdrOff:]).Type()
	hd := &e.txHdr
	*hd = wire.Header{
		Version: wire.Version,
		DestCID: c.peerCID,
		Type:    wire.TypeResync,
		Flags:   wire.FlagAckRequested,
		PSN:     x.psn,
		Resync:  wire.ResyncBody{Code: code, OrigType: orig},
	}
	e.stampQPN(c, &hd.Ext)
	c.seal(hd, 0)
	n, err := c.tmpl.Encode(e.room(f), hd, nil)
	if err != nil {
		e.cnt.own[cInternal]++
		e.freeFrame(f)
		e.failConn(c, ErrRetryExhausted)
		return
	}
	e.pool.SetLen(f, n)
	e.freeFrame(x.frame)
	x.frame = f
	x.payload = nil
	x.resync = true
	x.timeouts = 0
	x.tx = 0
	x.holdUntil = 0
	x.early, x.held = false, false
	e.cnt.own[cResyncSent]++
	e.retxQ.push(int32(idx))
}

// Abandon gives up on every outstanding packet of the connection that was
// sent with cookie (SendHeader.Cookie, not 0) and is not yet replaced by a
// resync: a resync with the same PSN takes each one's place at once (why
// says why, on the wire: wire.ResyncTimeout, wire.ResyncAborted), its
// retained frame becomes the resync's and a PayloadStable payload is no
// longer referenced. When Abandon returns the transport references none
// of the caller's buffers for those packets, though their PSNs are still
// outstanding: each cookie comes back once more, as for a packet that ran
// out of retries, in EventAbandoned when the peer acknowledges the resync
// (the packet may or may not have been delivered; once the peer has the
// resync a late copy of the packet is a duplicate there and never
// delivered), or never if the connection ends first. The resync is sent
// with the next Poll and retried like any packet (RetryLimit+1 sends,
// then the connection fails). It returns how many packets it gave up
// (GivenUp counts them); packets acknowledged or abandoned already are
// not touched. It is how the transaction layer ends an operation at its
// timeout or cancel without waiting for the peer. The bits of ignore are
// left out of the comparison: marks the ULP adds to some of an
// operation's cookies for itself (the transaction layer's IOI marks)
// that do not say which operation the packet is. Abandon does not
// allocate.
func (h *Conn) Abandon(cookie, ignore uint64, why wire.ResyncCode) int {
	c := h.live()
	cookie &^= ignore
	if c == nil || cookie == 0 {
		return 0
	}
	e := h.e
	n, failed := 0, false
	for k := range c.tx {
		e.eachOutstanding(c, k, func(idx uint32, x *retxCtx) bool {
			if x.cookie&^ignore != cookie || x.resync {
				return true
			}
			if !e.giveUp(idx, x, c, why) {
				failed = true // the connection failed
				return false
			}
			n++
			return true
		})
		if failed {
			break
		}
	}
	return n
}

// giveUp turns outstanding packet x into a resync in place: the retained
// frame is rewritten (no mbuf is needed, so this cannot fail for want of
// one) and the payload reference dropped. A packet never sent yet goes
// out as a resync in its turn; one sent already is resent now as a resync
// on a fresh retry budget. It reports false if the connection failed.
func (e *Endpoint) giveUp(idx uint32, x *retxCtx, c *conn, why wire.ResyncCode) bool {
	orig := wire.HeaderView(e.pool.Data(x.frame)[c.hdrOff:]).Type()
	hd := &e.txHdr
	*hd = wire.Header{
		Version: wire.Version,
		DestCID: c.peerCID,
		Type:    wire.TypeResync,
		Flags:   wire.FlagAckRequested,
		PSN:     x.psn,
		Resync:  wire.ResyncBody{Code: why, OrigType: orig},
	}
	c.seal(hd, 0)
	n, err := c.tmpl.Encode(e.room(x.frame), hd, nil)
	if err != nil {
		e.cnt.own[cInternal]++
		e.failConn(c, ErrRetryExhausted)
		return false
	}
	e.pool.SetLen(x.frame, n)
	x.payload = nil
	x.resync = true
	x.timeouts = 0
	x.tx = 0
	x.holdUntil = 0
	x.early, x.held = false, false
	e.cnt.own[cGivenUp]++
	if x.sends > 0 {
		e.retxQ.push(int32(idx)) // at once: nothing of the peer's hold-off applies to a resync's purpose
	}
	return true
}

// holdOff postpones the next resend of packet psn of window w and of
// every later unacknowledged packet of that window (an RNR or
// out-of-window NACK: the receiver will not take those either for now).
func (e *Endpoint) holdOff(c *conn, w wire.Window, psn uint32, d time.Duration) {
	k := c.window(w)
	tw := &c.tx[k]
	from := psn - tw.bsn
	if int32(from) < 0 || from >= tw.inFlight() {
		return // acknowledged meanwhile, or never sent
	}
	at := e.now.Add(d)
	for i := range tw.acked {
		z := ^tw.acked[i] & lowMask(i, tw.inFlight()) &^ lowMask(i, from)
		for z != 0 {
			b := uint32(bits.TrailingZeros64(z))
			z &= z - 1
			idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: tw.bsn + uint32(i)*64 + b})
			if !ok {
				e.cnt.own[cInternal]++
				continue
			}
			if x := &e.ctx[idx]; x.sends > 0 {
				e.retxQ.remove(int32(idx))
				x.early, x.held = false, false
				x.holdUntil = at
				e.armRetx(idx, x, at)
			}
		}
	}
}

// refund gives packet psn of window w back the transmission an
// out-of-window NACK refused: the packet arrived, too far ahead for the
// receiver to take yet (an in-order packet past a gap), so it was not lost
// and the resend after the hold-off must not spend its retry budget — a
// loss earlier in the window would otherwise abandon every packet past
// it. At most RetryLimit refunds per packet, so a peer that refuses a
// packet forever cannot keep it outstanding forever: it is sent at most
// 2×(RetryLimit+1) times.
func (e *Endpoint) refund(c *conn, w wire.Window, psn uint32) {
	idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: psn})
	if !ok {
		return
	}
	x := &e.ctx[idx]
	if x.resync || x.tx == 0 || int(x.refunds) >= e.opts.RetryLimit {
		return
	}
	x.refunds++
	x.tx--
	if x.timeouts > 0 {
		x.timeouts-- // the hold-off's end counts one again
	}
	e.cnt.own[cRefunds]++
}

// retriesSpent reports whether the current frame of x was sent
// RetryLimit+1 times: the next step is a resync (or failure), not a
// resend.
func (e *Endpoint) retriesSpent(x *retxCtx) bool { return int(x.tx) > e.opts.RetryLimit }

// detectLoss resends early the holes of window k that are lost by the
// time-based rule of RACK (RFC 8985): a packet sent after the hole was
// acknowledged (the window's rackMark), and the hole was last sent at
// least the mark's RTT plus the reordering window (rackState.reoWnd) ago.
// The window follows the reordering this connection sees, so packets
// still in flight on slower paths are given the time they take; a hole
// overtaken but not yet due gets its own timer moved to the window's end
// (rackDue), so the last holes are found without waiting for the RTO.
// EarlyRetransmitDistance stays a second condition for a mark that was a
// first transmission: a PSN that far past the hole was acknowledged —
// more than one overtaking packet before a resend, which keeps a single
// reordered pair (or an ACK that overtook another) from costing a resend
// when the window is still learning; after a resend was acknowledged the
// time rule alone decides, for every packet sent before it (the tail).
// Skipped: a hole the peer asked us to hold off (an RNR or out-of-window
// NACK: the hole is one the receiver refused, not one the network lost),
// one already queued, and one that used up its transmissions (its timer
// then runs out its schedule). An early resend counts toward RetryLimit
// like any other, and needs new evidence for the next: a packet sent
// after it acknowledged — lost refusal NACKs cannot make a packet resend
// forever.
func (e *Endpoint) detectLoss(c *conn, k int) {
	e.frtoVerdict(c, k, 0)
	dist := uint32(e.opts.EarlyRetransmitDistance)
	m := &c.rtt.rack.win[k]
	tw := &c.tx[k]
	if dist == 0 || m.at == 0 || tw.outstanding == 0 {
		return
	}
	limit := tw.acked.span()
	if limit > dist {
		limit -= dist
	} else {
		limit = 0
	}
	if m.resent {
		limit = tw.inFlight()
	}
	if limit == 0 {
		return
	}
	wnd := c.rtt.rack.reoWnd()
	w := wire.Window(k + 1)
	for i := range tw.acked {
		z := ^tw.acked[i] & lowMask(i, limit)
		for z != 0 {
			b := uint32(bits.TrailingZeros64(z))
			z &= z - 1
			psn := tw.bsn + uint32(i)*64 + b
			idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: psn})
			if !ok {
				e.cnt.own[cInternal]++
				continue
			}
			e.rackCheck(c, idx, &e.ctx[idx], m, wnd)
		}
	}
}

// rackCheck applies detectLoss's rule to one outstanding packet: queue it
// for an early resend when it is lost, or move its timer to when it will
// be (if that comes before its retransmit timeout).
func (e *Endpoint) rackCheck(c *conn, idx uint32, x *retxCtx, m *rackMark, wnd time.Duration) {
	if x.sends == 0 || !m.overtaken(x.sentAt, x.psn) || e.retxQ.contains(int32(idx)) ||
		e.now < x.holdUntil || e.retriesSpent(x) {
		return
	}
	due := x.sentAt.Add(m.rtt + wnd)
	if m.drainAck != 0 && m.drainSent <= x.sentAt {
		due = max(due, m.drainAck.Add(wnd))
	}
	if e.now >= due {
		x.early, x.held = true, false // lost by the reordering rule: no timeout's verdict needed
		x.prevAt, x.earlyDecl = x.sentAt, true
		c.cc.OnRetransmit(e.now, false)
		e.retxQ.push(int32(idx))
		return
	}
	if x.rackDue != 0 && x.rackDue <= due {
		return // armed for then already
	}
	if due >= e.rtoDue(c, x) {
		return // the retransmit timeout comes first
	}
	e.armRetx(idx, x, due)
	x.rackDue = due
}

// onRackTimer handles a packet's timer armed for the end of its
// reordering window: resend it early if it is lost by then, else put the
// timer back to the retransmit timeout. It reports false when that
// timeout is due too (the caller handles it as one).
func (e *Endpoint) onRackTimer(idx uint32, x *retxCtx) bool {
	c := &e.conns[x.conn]
	rto := e.rtoDue(c, x)
	if e.now >= rto {
		return false
	}
	e.armRetx(idx, x, rto)
	e.rackCheck(c, idx, x, &c.rtt.rack.win[c.window(x.win)], c.rtt.rack.reoWnd())
	return true
}

// owedDup notes that packet psn of window w came again, one the receiver
// had already: the next ACK reports it (wire.AckBody.Dup), at once. One
// report per ACK, the latest: a signal to the sender, not an account.
func (e *Endpoint) owedDup(c *conn, w wire.Window, psn uint32) {
	if e.opts.NoDupReports {
		return
	}
	c.dupWin, c.dupPSN = w, psn
}

// onDupReport takes the peer's report that our packet psn of window w
// reached it again (a duplicate-SACK): if our latest transmission of it
// was an early resend, that resend was not needed — the original was
// late, not lost — and the reordering window widens to cover how late it
// was (rackState.floor), as RFC 8985 widens its window on a DSACK. A
// report of a packet we never resent early (a timeout's resend, a copy
// the network made) changes nothing.
func (e *Endpoint) onDupReport(c *conn, w wire.Window, psn uint32) {
	e.cnt.own[cRxDupReport]++
	if e.opts.NoDupReports || w != wire.WindowRequest && w != wire.WindowData {
		return
	}
	r := &c.rtt.rack
	if took, ok := r.tmo.take(w, psn, c.stats.AcksReceived); ok {
		// The timer fired for packets that were only waiting.
		e.cnt.own[cSpuriousTimeout]++
		c.rtt.stalled(took, e.now, &e.opts)
		return
	}
	late, ok := r.takeResent(w, psn)
	if !ok {
		idx, live := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: psn})
		if !live {
			return
		}
		x := &e.ctx[idx]
		if x.sends < 2 || !x.earlyDecl || x.prevAt == 0 {
			return
		}
		// Still outstanding: the resend was not needed, but when the
		// first copy came is unknown — its ACK may have been lost, or
		// could not name it (past the ACK's bitmap, behind a hole that
		// a dead path keeps open). The time since it was sent is no
		// lateness: taken as one, each report of a packet held behind
		// such a hole widened the window more than the one before.
		e.cnt.own[cSpuriousDup]++
		return
	}
	e.cnt.own[cSpuriousDup]++
	r.widen(late)
}

// rtoDue returns when packet x's retransmit timeout expires: its RTO
// (doubled per expiry) after the later of its last transmission and the
// last ACK that acknowledged a packet of its window (rackMark.progress).
func (e *Endpoint) rtoDue(c *conn, x *retxCtx) clock.Time {
	return max(x.sentAt, c.rtt.rack.win[c.window(x.win)].progress).Add(c.rtt.backoff(uint8(min(x.timeouts, 255)), e.opts.MaxRTO))
}

// rackAcked takes what an acknowledged packet tells the loss detection,
// before its context is released: the window's mark (the most recently
// sent packet acknowledged), the least RTT, and the reordering estimate —
// how late the packet came if a later-sent one was acknowledged first, or
// how late the original of a spurious early resend came (its ACK too soon
// for the resend: the window grows at once, SpuriousEarlyRetransmit counts
// those) — and what a later duplicate report needs to know of a resend.
func (e *Endpoint) rackAcked(c *conn, k int, x *retxCtx) {
	if x.sends == 0 || x.sentAt == 0 {
		return
	}
	r := &c.rtt.rack
	m := &r.win[k]
	m.progress = e.now
	at, rtt := x.sentAt, e.now.Sub(x.sentAt)
	resent, fresh := x.sends > 1, x.sends == 1
	// The ACK came too soon for the resend it acknowledges (tooSoon): it
	// was for an earlier copy. See below for what that proves.
	ambiguous := resent && x.prevAt != 0 && r.tooSoon(rtt, e.opts.NoDupReports)
	probe := false // x is the probe of its window's timeout under test
	if f := &c.rtt.frto[k]; f.at != 0 {
		probe = x.psn == f.probe
		// Evidence for the window's timeout under test (frtoVerdict).
		switch {
		case fresh && x.sentAt < f.at,
			x.psn == f.probe && ambiguous: // the probe's first copy
			f.orig = true
		case x.psn == f.probe:
			f.probeAcked = true
		}
	}
	// An ACK too soon for the resend it acknowledges (tooSoon) came for an
	// earlier copy, and the resend was not needed. An early resend's is
	// taken so at once: how late its original came widens the reordering
	// window before more of a late burst is resent. A timer's resend waited
	// out the timer, so the time its first copy took includes the timer
	// itself whenever that copy's ACK was lost: learnt as a stall, each
	// such wait set the next timeout a quarter longer. With duplicate
	// reports that ACK is left ambiguous — it moves no mark (RFC 8985 skips
	// such a sample) — and the peer's report of the resend decides
	// (tmo.note); without them its timing is all there is.
	if ambiguous && (x.earlyDecl || e.opts.NoDupReports) {
		at, rtt, resent, ambiguous = x.prevAt, e.now.Sub(x.prevAt), false, false
		if !x.earlyDecl {
			// Not a probe's: frtoVerdict takes the wait from the ACK's
			// echo, as that time includes the probe's own timer when the
			// first copy's ACK was lost.
			e.cnt.own[cSpuriousTimeout]++
			if !probe {
				c.rtt.stalled(rtt, e.now, &e.opts)
			}
		} else {
			e.cnt.own[cSpuriousEarly]++
			if m.overtaken(at, x.psn) {
				// At least that late, with a margin; not more for each
				// of many spurious resends that one late burst caused.
				r.reo = max(r.reo, rtt-m.rtt+r.minRTT/4)
				if !e.opts.NoDupReports {
					r.widen(rtt - m.rtt + r.minRTT/4) // as a duplicate report would
				}
			}
		}
	}
	if fresh {
		if r.minRTT == 0 {
			r.reo = rtt // until the samples show how much reordering there is
		}
		if r.minRTT == 0 || rtt < r.minRTT {
			r.minRTT = rtt
		}
		// Overtaken by a resend is no evidence of reordering where the
		// peer's duplicate reports say which copy arrived: which copy a
		// resend's ACK was for is unknown (Karn). After a tail whose ACK
		// was lost, the timer's probe is acknowledged with the packets
		// sent before it; after the peer's loop stalled, the probe's
		// first copy is acknowledged as the resend, just before the
		// packets sent with it. Taken for overtaken, each gave the
		// lateness of a whole timeout or stall, and every later hole
		// waited it out. Without duplicate reports timing is all there
		// is, on a sprayed fabric the reordering behind a resend too:
		// without these samples bench/integrity's healthy fabric moved an
		// ordered path, two packets each resent early twice.
		switch {
		case !m.overtaken(at, x.psn):
			r.inOrder()
		case !m.resent || e.opts.NoDupReports:
			r.lateness(rtt - m.rtt)
		}
	}
	if resent && x.prevAt != 0 && !e.opts.NoDupReports {
		// Acknowledged after a resend: the resend may have been what
		// arrived, or the original, late. A duplicate report, if one
		// follows, says which (onDupReport).
		if x.earlyDecl {
			r.noteResent(x.win, x.psn, e.now.Sub(x.prevAt)-m.rtt+r.minRTT/4)
		} else if !probe { // as above: frtoVerdict learns a probe's wait
			r.tmo.note(x.win, x.psn, e.now.Sub(x.prevAt), e.now, c.rtt.rto, c.stats.AcksReceived)
		}
	}
	if !resent {
		m.drained(at, e.now, r.reoWnd())
	}
	// A timeout's probe moves no mark: its ACK may be its first copy's
	// (the peer's loop stalled past the timeout), and a mark at the
	// resend would find every packet sent before it lost at once. The
	// episode's verdict resends them if the probe's loss was real.
	if !ambiguous && !probe && !m.overtaken(at, x.psn) && (at != m.at || x.psn != m.psn) {
		m.at, m.rtt, m.psn, m.resent = at, rtt, x.psn, resent
	}
}

func (e *Endpoint) armCtrl(c *conn, after clock.Time) {
	if c.ctrlTimer != clock.NoTimer {
		e.wheel.Cancel(c.ctrlTimer)
	}
	id, err := e.wheel.Arm(after, uint64(timerCtrl)<<32|uint64(uint32(c.idx)))
	if err != nil {
		e.cnt.own[cInternal]++
		id = clock.NoTimer
	}
	c.ctrlTimer = id
}

// onCtrlTimeout resends ConnOpen or ConnAccept, gives up on setup, or ends
// a closed connection's linger.
func (e *Endpoint) onCtrlTimeout(c *conn) {
	switch c.state {
	case StateOpening:
		if c.ctrlTries > e.opts.RetryLimit {
			e.failConn(c, ErrOpenTimeout)
			return
		}
		e.wantCtrl(c, ctrlOpen)
	case StateAccepting:
		if c.ctrlTries > e.opts.RetryLimit {
			e.failConn(c, ErrOpenTimeout) // never announced: counted, not reported
			return
		}
		e.wantCtrl(c, ctrlAccept)
	case StateEstablished, StateClosing:
		e.onIdleTimer(c)
	case StateClosed:
		e.freeConn(c, StateClosed, nil)
	}
}

// onIdleTimer is the liveness check of an established (or closing)
// connection, on its setup timer: past IdleTimeout without a packet from
// the peer it fails (ErrIdleTimeout); past KeepAlive it sends a probe,
// which a live peer answers; and while the ULP awaits the peer
// (SetAwaiting) it probes a silent peer on the retransmission schedule
// (awaitProbes, awaitDue). One timer per connection, re-armed here, so the
// packet path only records the time.
func (e *Endpoint) onIdleTimer(c *conn) {
	if to := e.opts.IdleTimeout; to > 0 && e.now.Sub(c.lastRx) >= to {
		e.cnt.own[cIdleTimeouts]++
		e.failConn(c, ErrIdleTimeout)
		return
	}
	if ka := e.opts.KeepAlive; ka > 0 && e.now.Sub(c.lastRx) >= ka {
		c.probe = true
		e.ackNow(c)
		e.cnt.own[cKeepAliveSent]++
	}
	if e.awaitProbes(c) {
		if c.lastRx >= c.probeAt {
			// The peer spoke since the last probe (at the same instant
			// too: a packet that arrived before the probe went would have
			// made it not due).
			c.probesOut = 0
			c.reclaim = false // it answered: alive
		}
		if e.awaitProbes(c) && e.now >= e.awaitDue(c) {
			if int(c.probesOut) > e.opts.RetryLimit {
				e.failConn(c, ErrRetryExhausted)
				return
			}
			c.probe = true
			e.ackNow(c)
			c.probesOut++
			c.probeExp = uint8(min(int(c.probeExp)+1, 255))
			c.probeAt = e.now
			e.cnt.own[cAwaitProbes]++
		}
	}
	if next, ok := e.nextIdleCheck(c); ok {
		e.armCtrl(c, next)
	}
}

// awaitProbes reports whether connection c probes a silent peer because
// its ULP awaits it (SetAwaiting): Options.IdleTimeout, when set, is the
// liveness policy instead.
func (e *Endpoint) awaitProbes(c *conn) bool { return c.awaiting || c.closeWait || c.reclaim }

// awaitDue returns when an awaiting connection sends its next probe: the
// RTO after the later of the peer's last packet and our last probe,
// doubled per probe of this wait (answered or not: a live peer that is
// busy is not probed every RTO), at most MaxRTO; only unanswered probes
// count toward giving up (RetryLimit+1), so a peer gone silent is found
// within RetryLimit+1 intervals of at most MaxRTO.
func (e *Endpoint) awaitDue(c *conn) clock.Time {
	from := max(c.lastRx, c.probeAt)
	return from.Add(c.rtt.backoff(max(uint8(min(c.probesOut, 255)), c.probeExp), e.opts.MaxRTO))
}

// nextIdleCheck returns when onIdleTimer should look again: when the
// connection will have been silent for KeepAlive (or another KeepAlive
// after a probe), or for IdleTimeout, or an awaiting connection's next
// probe is due, whichever is first; ok is false when none applies.
func (e *Endpoint) nextIdleCheck(c *conn) (clock.Time, bool) {
	next, ok := clock.Time(1<<63-1), false
	if ka := e.opts.KeepAlive; ka > 0 {
		next, ok = c.lastRx.Add(ka), true
		if next <= e.now {
			next = e.now.Add(ka)
		}
	}
	if to := e.opts.IdleTimeout; to > 0 {
		next, ok = min(next, c.lastRx.Add(to)), true
	}
	if e.awaitProbes(c) {
		due := e.awaitDue(c)
		if c.lastRx >= c.probeAt {
			due = c.lastRx.Add(c.rtt.backoff(c.probeExp, e.opts.MaxRTO))
		}
		next, ok = min(next, max(due, e.now)), true
	}
	return next, ok
}
