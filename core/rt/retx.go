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
	sends    uint16 // transmissions so far
	timeouts uint16 // timer expiries since the packet (or its resync) was built
	early    bool   // queued as an early retransmit
	resync   bool   // the frame is a resync standing in for the abandoned packet
	nacked   bool   // the resync stands in for a packet the peer's ULP refused
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
// past RetryLimit put a resync in its place, or past the resync's limit
// fail the connection.
func (e *Endpoint) onRetxTimeout(idx uint32, x *retxCtx) {
	c := &e.conns[x.conn]
	x.timeouts++
	if int(x.timeouts) > e.opts.RetryLimit {
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
				e.armRetx(idx, x, at)
			}
		}
	}
}

// earlyRetransmit resends holes of window k that the peer has overtaken by
// EarlyRetransmitDistance PSNs, if they were last sent an RTT ago or more
// (so one hole is resent at most once per RTT).
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
			if x.sends == 0 || e.retxQ.contains(int32(idx)) || e.now.Sub(x.sentAt) < recency {
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
	case StateClosed:
		e.freeConn(c, StateClosed, nil)
	}
}
