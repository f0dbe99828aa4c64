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
	sends    uint16 // transmissions so far, packet and resync (saturates: never wraps to "first")
	tx       uint16 // transmissions of the current frame (the packet, then its resync)
	timeouts uint16 // timer expiries since the packet (or its resync) was built
	// holdUntil: the peer asked us not to resend before then (an RNR or
	// out-of-window NACK); early retransmission waits too.
	holdUntil clock.Time
	early     bool // queued as an early retransmit
	resync    bool // the frame is a resync standing in for the abandoned packet
	nacked    bool // the resync stands in for a packet the peer's ULP refused
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
// back-off or early: every resend counts) put a resync in its place, or
// past the resync's limit fail the connection.
func (e *Endpoint) onRetxTimeout(idx uint32, x *retxCtx) {
	c := &e.conns[x.conn]
	x.timeouts++
	if e.retriesSpent(x) {
		if c.state == StateClosing && c.peerClosed() && c.tx[0].outstanding == 1 && c.tx[1].outstanding == 0 &&
			wire.HeaderView(e.pool.Data(x.frame)[c.hdrOff:]).Type() == wire.TypeConnClose {
			e.closeUnacked(c)
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
	x.early = false
	e.retxQ.push(int32(idx))
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
	x.early = false
	e.cnt.own[cResyncSent]++
	e.retxQ.push(int32(idx))
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
				x.early = false
				x.holdUntil = at
				e.armRetx(idx, x, at)
			}
		}
	}
}

// retriesSpent reports whether the current frame of x was sent
// RetryLimit+1 times: the next step is a resync (or failure), not a
// resend.
func (e *Endpoint) retriesSpent(x *retxCtx) bool { return int(x.tx) > e.opts.RetryLimit }

// earlyRetransmit resends holes of window k that the peer has overtaken by
// EarlyRetransmitDistance PSNs, if they were last sent an RTT ago or more
// (so one hole is resent at most once per RTT), unless the peer asked us
// to hold off (an RNR or out-of-window NACK: the hole is one the receiver
// refused, not one the network lost) or the hole used up its retries (the
// timer then puts a resync in its place). An early resend counts toward
// RetryLimit like any other: lost refusal NACKs cannot make a packet
// resend forever.
func (e *Endpoint) earlyRetransmit(c *conn, k int) {
	dist := uint32(e.opts.EarlyRetransmitDistance)
	tw := &c.tx[k]
	hi := tw.acked.span()
	if dist == 0 || hi <= dist {
		return
	}
	limit := hi - dist
	recency := c.rtt.srtt
	if c.rtt.samples == 0 {
		recency = c.rtt.rto / 2
	}
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
			x := &e.ctx[idx]
			if x.sends == 0 || e.retxQ.contains(int32(idx)) || e.now.Sub(x.sentAt) < recency ||
				e.now < x.holdUntil || e.retriesSpent(x) {
				continue
			}
			x.early = true
			c.cc.OnRetransmit(e.now, false)
			e.retxQ.push(int32(idx))
		}
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
		}
		if e.now >= e.awaitDue(c) {
			if int(c.probesOut) > e.opts.RetryLimit {
				e.failConn(c, ErrRetryExhausted)
				return
			}
			c.probe = true
			e.ackNow(c)
			c.probesOut++
			c.probeAt = e.now
			e.cnt.own[cKeepAliveSent]++
		}
	}
	if next, ok := e.nextIdleCheck(c); ok {
		e.armCtrl(c, next)
	}
}

// awaitProbes reports whether connection c probes a silent peer because
// its ULP awaits it (SetAwaiting): Options.IdleTimeout, when set, is the
// liveness policy instead.
func (e *Endpoint) awaitProbes(c *conn) bool { return c.awaiting && e.opts.IdleTimeout == 0 }

// awaitDue returns when an awaiting connection sends its next probe: the
// RTO after the later of the peer's last packet and our last probe,
// doubled per probe unanswered, at most MaxRTO — a retransmission's
// schedule, so a peer gone silent is given up on as an unacknowledged
// packet would be (RetryLimit+1 probes).
func (e *Endpoint) awaitDue(c *conn) clock.Time {
	from := max(c.lastRx, c.probeAt)
	return from.Add(c.rtt.backoff(uint8(min(c.probesOut, 255)), e.opts.MaxRTO))
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
			due = c.lastRx.Add(c.rtt.backoff(0, e.opts.MaxRTO))
		}
		next, ok = min(next, max(due, e.now)), true
	}
	return next, ok
}
