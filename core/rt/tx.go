package rt

import (
	"fmt"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

// enqueue builds a reliable packet in window w and registers it in the
// retransmission engine.
func (e *Endpoint) enqueue(c *conn, w wire.Window, sh *SendHeader, payload []byte) (uint32, error) {
	tw := &c.tx[c.window(w)]
	if tw.full() || int(tw.outstanding) >= c.cc.Window() {
		return 0, ErrWindowFull
	}
	// The header, the context and the send fields below are zeroed in
	// place and filled field by field, on every packet: a composite
	// literal stored through a pointer (or whose address is taken) is
	// built in a temporary and copied, and the copy's wide loads stall on
	// the narrow stores that built it.
	hd := &e.txHdr
	*hd = wire.Header{}
	hd.Version = wire.Version
	hd.DestCID = c.peerCID
	hd.Type = sh.Type
	hd.Flags = sh.Flags &^ (wire.FlagRetransmission | wire.FlagHasExtension)
	hd.Phase = sh.Phase
	hd.PSN = tw.nsn
	hd.RSN = sh.RSN
	hd.SSN = sh.SSN
	hd.ReqLen = sh.ReqLen
	hd.Offset = sh.Offset
	hd.Desc = sh.Desc
	hd.Ext = sh.Ext
	hd.Ext.Present &^= wire.ExtSourceCID
	e.stampQPN(c, &hd.Ext)
	c.seal(hd, len(payload))
	if !c.earlyExt(hd, c.hdrOff+len(payload), e.maxFrame) {
		return 0, ErrNotEstablished // too big for an early packet: it waits for ConnAccept
	}
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
	if sh.SrcPort != 0 || sh.DSCP != 0 {
		wire.SetClass(e.room(f)[:n], sh.SrcPort, sh.DSCP)
	}
	e.pool.SetLen(f, n)
	psn := tw.assign()
	x := &e.ctx[idx]
	*x = retxCtx{}
	x.frame, x.payload, x.cookie = f, kept, sh.Cookie
	x.conn, x.win, x.psn = c.idx, w, psn
	x.route = routeOf(sh)
	x.push = sh.Type == wire.TypePushUnsolicitedData || sh.Type == wire.TypePushSolicitedData
	e.newQ.push(int32(idx))
	c.stats.Sent++
	return psn, nil
}

// transmit builds up to one burst of frames, in priority order: NACKs to
// refused initiators, connection management, ACKs and NACKs, resends, new
// packets; then hands everything pending to the port. It returns frames
// built plus frames the port took.
func (e *Endpoint) transmit() int {
	budget := e.opts.Burst - len(e.pending)
	built := 0
	for budget > 0 && e.nOrphans > 0 {
		if !e.sendOrphan(&e.orphans[e.nOrphans-1]) {
			break
		}
		e.nOrphans--
		budget--
		built++
	}
	// Each connection on ctrlQ is visited at most once: a ConnClose that
	// still finds no room goes back to the tail.
	for n := e.ctrlQ.len(); n > 0 && budget > 0; n-- {
		c := &e.conns[e.ctrlQ.pop()]
		switch c.ctrl {
		case ctrlOpen, ctrlAccept:
			if !e.sendCtrl(c) {
				e.ctrlQ.push(c.idx)
				n = 0
				continue
			}
			budget--
			built++
		case ctrlClose:
			c.ctrl = ctrlNone
			e.progressClose(c)
		}
	}
	for budget > 0 && e.ackQ.len() > 0 {
		c := &e.conns[e.ackQ.front()]
		if !e.sendAck(c) {
			break
		}
		budget--
		built++
	}
	for budget > 0 && e.retxQ.len() > 0 {
		idx := e.retxQ.front()
		if !e.sendCtx(uint32(idx)) {
			break
		}
		budget--
		built++
	}
	for budget > 0 && e.newQ.len() > 0 {
		idx := e.newQ.front()
		if !e.sendCtx(uint32(idx)) {
			break
		}
		budget--
		built++
	}
	if len(e.pending) == 0 {
		return built
	}
	n := e.port.TxBurst(e.queue, e.pending)
	// Whatever the port would hold to batch its system calls goes now
	// (port.TxFlusher): every frame's timestamp is its RTT sample's start,
	// and measured on a veth pair batching cost more goodput (in inflated
	// RTTs the congestion control answered) than it saved.
	port.FlushTx(e.port, e.queue)
	e.cnt.own[cTxFrames] += uint64(n)
	if n < len(e.pending) {
		e.cnt.own[cTxRefused] += uint64(len(e.pending) - n)
		k := copy(e.pending, e.pending[n:])
		e.pending = e.pending[:k]
	} else {
		e.pending = e.pending[:0]
	}
	return built + n
}

// sendCtx transmits a copy of an outstanding packet's retained frame (its
// first transmission or a resend) and (re)arms its retransmit timer. It
// returns false when no mbuf is left.
func (e *Endpoint) sendCtx(idx uint32) bool {
	x := &e.ctx[idx]
	c := &e.conns[x.conn]
	f := e.allocFrame()
	if f == mbuf.NoHandle {
		return false
	}
	e.newQ.remove(int32(idx))
	e.retxQ.remove(int32(idx))
	src := e.pool.Data(x.frame)
	n := len(src)
	if x.payload != nil {
		n = max(n+len(x.payload), wire.MinFrameLen)
	}
	dst := e.room(f)[:n]
	copy(dst, src)
	if x.payload != nil {
		// The retained headers' checksum covers them alone: the payload's
		// sum is taken as it is copied.
		end := len(src) + len(x.payload)
		c.tmpl.AddPayloadSum(dst, wire.CopyChecksum(dst[len(src):end], x.payload, 0))
		clear(dst[end:])
	}
	e.pool.SetLen(f, n)

	k := c.window(x.win)
	tw := &c.tx[k]
	var send wire.SendFields // field by field: see enqueue
	send.Retry = uint8(min(x.sends, wire.MaxRetry))
	send.ReqEBSN, send.DataEBSN = c.rx[0].bsn, c.rx[1].bsn
	send.TxTime, send.TxEcho = e.now32, c.peerTx
	if x.sends > 0 {
		send.Flags |= wire.FlagRetransmission | wire.FlagAckRequested
	}
	if tw.full() || int(tw.outstanding) >= c.cc.Window() {
		// The window is closed until an ACK comes back: ask for it now.
		send.Flags |= wire.FlagAckRequested
	} else if x.push && x.sends == 0 && e.newQ.len() == 0 && int(tw.outstanding) < e.opts.AckEvery {
		// A push's last packet from a sender about to go idle with fewer
		// than AckEvery in flight: the receiver's count will not reach
		// AckEvery, so its ACK, the push's completion, would wait the
		// AckDelay (a lone push's round trip was 15 µs over veth, 10 of
		// them that wait). Only pushes: nothing on the wire answers them,
		// while a pull's data or a Send's reply carries the ACK soon, and a
		// standalone ACK sent at once put a second frame, and its system
		// call, on a request-response's path (over veth 6.8 → 11.8 µs).
		// A sender with more in flight leaves the coalescing as it is.
		send.Flags |= wire.FlagAckRequested
	}
	if x.route != routeNone {
		e.steer(c, x, dst) // its path: source port and checksum (paths.go)
	}
	// Flags, retry, piggybacked BSNs and timestamps for this transmission,
	// the UDP checksum updated from the header bytes alone.
	c.tmpl.Refresh(dst, &send)
	e.pending = append(e.pending, f)

	switch {
	case x.sends == 0:
		e.cnt.own[cTxData]++
	case x.early:
		e.cnt.own[cTxEarlyRetransmit]++
		c.stats.EarlyRetransmits++
	default:
		e.cnt.own[cTxRetransmit]++
		c.stats.Retransmits++
	}
	// Saturating: a counter that wrapped would flag a resend as a first
	// transmission (Karn's rule: its echo would give a false RTT sample).
	if x.sends < ^uint16(0) {
		x.sends++
	}
	if x.tx < ^uint16(0) {
		x.tx++
	}
	x.early = false
	x.sentAt = e.now
	e.armRetx(idx, x, e.now.Add(c.rtt.backoff(uint8(min(x.timeouts, 255)), e.opts.MaxRTO)))
	e.piggybacked(c)
	return true
}

// sendCtrl builds ConnOpen or ConnAccept and arms the setup timer.
func (e *Endpoint) sendCtrl(c *conn) bool {
	f := e.allocFrame()
	if f == mbuf.NoHandle {
		return false
	}
	hd := &e.txHdr
	*hd = wire.Header{
		Version:  wire.Version,
		Type:     wire.TypeConnOpen,
		ReqEBSN:  c.rx[0].bsn,
		DataEBSN: c.rx[1].bsn,
		TxTime:   e.now32,
		Ext:      wire.Ext{Present: wire.ExtSourceCID, SourceCID: c.localCID},
	}
	if c.ctrl == ctrlAccept {
		hd.Type = wire.TypeConnAccept
		hd.DestCID = c.peerCID
		hd.TxEcho = c.peerTx
	}
	e.stampQPN(c, &hd.Ext)
	c.earlyOpen(hd)
	c.sealHello(hd)
	c.sealHelloTag(hd)
	n, err := c.tmpl.Encode(e.room(f), hd, nil)
	if err != nil {
		e.cnt.own[cInternal]++
		e.freeFrame(f)
		c.ctrl = ctrlNone
		return true
	}
	e.pool.SetLen(f, n)
	e.pending = append(e.pending, f)
	e.cnt.own[cTxControl]++
	c.ctrl = ctrlNone
	if c.state == StateOpening || c.state == StateAccepting {
		c.ctrlTries++
		c.ctrlSentAt = e.now
		e.armCtrl(c, e.now.Add(c.rtt.backoff(uint8(min(c.ctrlTries-1, 255)), e.opts.MaxRTO)))
	}
	return true
}

// sendOrphan builds a NACK to an initiator that has no connection here.
func (e *Endpoint) sendOrphan(o *orphanNack) bool {
	f := e.allocFrame()
	if f == mbuf.NoHandle {
		return false
	}
	hd := &e.txHdr
	*hd = wire.Header{
		Version: wire.Version,
		DestCID: o.destCID,
		Type:    wire.TypeNack,
		TxTime:  e.now32,
		TxEcho:  o.echo,
		Nack: wire.NackBody{
			Code:             o.code,
			Window:           wire.WindowRequest,
			RNRTimeoutMicros: uint32(e.opts.RNRTimeout.Microseconds()),
		},
	}
	if o.srcCID != 0 {
		hd.Ext = wire.Ext{Present: wire.ExtSourceCID, SourceCID: o.srcCID}
		e.cnt.own[cTxBadCIDNack]++
	}
	n, err := wire.EncodeFrame(e.room(f), &o.addrs, hd, nil)
	if err != nil {
		e.cnt.own[cInternal]++
		e.freeFrame(f)
		return true
	}
	e.pool.SetLen(f, n)
	e.pending = append(e.pending, f)
	e.cnt.own[cTxNack]++
	return true
}
