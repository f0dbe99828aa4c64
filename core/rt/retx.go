package rt

import (
	"fmt"
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

// SendHeader is what the ULP chooses of a reliable packet's header. The
// transport fills in the rest: destination CID, PSN, eBSNs, timestamps,
// retry count.
type SendHeader struct {
	// Type is the packet type; its window (Type.Window) is the one the PSN
	// comes from. ConnClose and Resync are the transport's own.
	Type wire.Type
	// Flags: AckRequested, Ordered, IOIInOrder, LastOfMessage and ECNEcho
	// are sent as given; Retransmission and HasExtension are the
	// transport's.
	Flags  wire.Flags
	RSN    uint32
	SSN    uint32
	ReqLen uint32
	Offset uint32
	Phase  wire.Phase
	// Ext carries the placement, QPN and region extensions; the source CID
	// is the transport's.
	Ext wire.Ext
	// PayloadStable promises that the payload stays valid and unchanged
	// until the packet resolves (its Cookie comes back, or the connection
	// fails). The transport then keeps a reference to it instead of a
	// copy and copies it straight into each transmission, summing it for
	// the UDP checksum as it copies: one pass over the payload per
	// transmission instead of three. A payload changed meanwhile is sent
	// as it is then (as an RDMA send buffer changed before its completion:
	// the peer may get either version).
	PayloadStable bool
	// Cookie is the ULP's own word for this packet. It is not sent; the
	// transport hands it back when the packet resolves: to the ACK handler
	// (SetAckHandler) when the peer acknowledges it, in EventNack when the
	// peer's ULP refuses it, in EventAbandoned when it runs out of retries.
	Cookie uint64
}

// Send queues one reliable packet: it takes the next PSN of the type's
// window, copies the payload into a frame that the retransmission engine
// keeps until the peer acknowledges it (or, with PayloadStable, keeps a
// reference to the payload), and returns the PSN; the next Poll
// transmits it. When the window, the congestion window, the CAM or the
// pool is full it returns an error matching ErrBusy and changes nothing:
// retry after a Poll. Send does not allocate.
func (h *Conn) Send(sh SendHeader, payload []byte) (psn uint32, err error) {
	c := h.live()
	if c == nil {
		return 0, ErrClosed
	}
	switch c.state {
	case StateEstablished:
	case StateOpening, StateAccepting:
		return 0, ErrNotEstablished
	default:
		return 0, ErrClosed
	}
	if c.closeWanted {
		return 0, ErrClosed
	}
	w := sh.Type.Window()
	if w == wire.WindowNone || sh.Type == wire.TypeConnClose || sh.Type == wire.TypeResync {
		return 0, ErrBadType
	}
	return h.e.enqueue(c, w, &sh, payload)
}

// CanSend reports whether Send of a packet of type t would find room in
// the windows and the CAM (the pool may still refuse).
func (h *Conn) CanSend(t wire.Type) bool {
	c := h.live()
	if c == nil || c.state != StateEstablished || c.closeWanted {
		return false
	}
	w := t.Window()
	if w == wire.WindowNone {
		return false
	}
	tw := &c.tx[c.window(w)]
	return !tw.full() && int(tw.outstanding) < c.cc.Window() && h.e.retx.Len() < h.e.retx.Cap()
}

// enqueue builds a reliable packet in window w and registers it in the
// retransmission engine.
func (e *Endpoint) enqueue(c *conn, w wire.Window, sh *SendHeader, payload []byte) (uint32, error) {
	tw := &c.tx[c.window(w)]
	if tw.full() || int(tw.outstanding) >= c.cc.Window() {
		return 0, ErrWindowFull
	}
	hd := &e.txHdr
	*hd = wire.Header{
		Version: wire.Version,
		DestCID: c.peerCID,
		Type:    sh.Type,
		Flags:   sh.Flags &^ (wire.FlagRetransmission | wire.FlagHasExtension),
		Phase:   sh.Phase,
		PSN:     tw.nsn,
		RSN:     sh.RSN,
		SSN:     sh.SSN,
		ReqLen:  sh.ReqLen,
		Offset:  sh.Offset,
		Ext:     sh.Ext,
	}
	hd.Ext.Present &^= wire.ExtSourceCID
	if c.hdrOff+hd.Len()+len(payload) > e.maxFrame {
		return 0, ErrTooLarge
	}
	if e.retx.Len() >= e.retx.Cap() {
		e.cnt.own[cCAMFull]++
		return 0, ErrCAMFull
	}
	f := e.allocFrame()
	if f == mbuf.NoHandle {
		return 0, ErrNoBuffer
	}
	key := cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: tw.nsn}
	idx, err := e.retx.Insert(key)
	if err != nil {
		e.freeFrame(f)
		if err != cam.ErrFull {
			e.cnt.own[cInternal]++
		}
		e.cnt.own[cCAMFull]++
		return 0, ErrCAMFull
	}
	var n int
	var kept []byte
	if sh.PayloadStable && len(payload) > 0 {
		n, _, err = c.tmpl.EncodeHeaders(e.room(f), hd, len(payload))
		kept = payload
	} else {
		n, err = c.tmpl.Encode(e.room(f), hd, payload)
	}
	if err != nil {
		e.retx.DeleteIndex(idx)
		e.freeFrame(f)
		return 0, fmt.Errorf("rt: building %v: %w", sh.Type, err)
	}
	e.pool.SetLen(f, n)
	psn := tw.assign()
	e.ctx[idx] = retxCtx{frame: f, payload: kept, conn: c.idx, win: w, psn: psn, cookie: sh.Cookie}
	e.newQ.push(int32(idx))
	c.stats.Sent++
	return psn, nil
}

// retire releases the contexts of PSNs of window k that an ACK just
// acknowledged.
func (e *Endpoint) retire(c *conn, k int, newly []uint32) {
	w := wire.Window(k + 1)
	for _, psn := range newly {
		idx, ok := e.retx.Delete(cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: psn})
		if !ok {
			e.cnt.own[cInternal]++
			continue
		}
		x := &e.ctx[idx]
		abandoned, nacked, cookie := x.resync && !x.nacked, x.nacked, x.cookie
		e.releaseCtx(idx)
		e.cnt.own[cAckRetired]++
		switch {
		case abandoned:
			e.cnt.own[cAbandoned]++
			e.emit(Event{Kind: EventAbandoned, Conn: c.handle, Window: w, PSN: psn, Cookie: cookie})
		case nacked:
			// The packet was reported in EventNack when the NACK came; its
			// place in the window is free now.
			e.emit(Event{Kind: EventResynced, Conn: c.handle, Window: w, PSN: psn})
		case e.onAcked != nil:
			e.onAcked(c.handle, w, psn, cookie)
		}
	}
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
