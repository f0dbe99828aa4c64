package rt

import (
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/port"
	"github.com/peregrine-net/peregrine/core/wire"
)

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
	send := wire.SendFields{
		Retry:    uint8(min(x.sends, wire.MaxRetry)),
		ReqEBSN:  c.rx[0].bsn,
		DataEBSN: c.rx[1].bsn,
		TxTime:   e.now32,
		TxEcho:   c.peerTx,
	}
	if x.sends > 0 {
		send.Flags |= wire.FlagRetransmission | wire.FlagAckRequested
	}
	if tw.full() || int(tw.outstanding) >= c.cc.Window() {
		// The window is closed until an ACK comes back: ask for it now.
		send.Flags |= wire.FlagAckRequested
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
	x.sends++
	x.early = false
	x.sentAt = e.now
	e.armRetx(idx, x, e.now.Add(c.rtt.backoff(uint8(min(x.timeouts, 255)), e.opts.MaxRTO)))
	e.piggybacked(c)
	return true
}

// piggybacked notes that a packet to the peer carried our receive BSNs: a
// pending ACK that would say no more is not needed.
func (e *Endpoint) piggybacked(c *conn) {
	if c.ackCount == 0 && !c.ackNow {
		return
	}
	if c.rx[0].holes() || c.rx[1].holes() || c.oow != 0 || c.nack.code != 0 || c.nULPNack != 0 {
		return
	}
	e.ackSent(c)
}

// ackSent resets the ACK coalescing state after an ACK went out.
func (e *Endpoint) ackSent(c *conn) {
	c.ackCount = 0
	c.ackNow = false
	c.oow, c.oowCount = 0, 0
	if c.ackTimer != 0 {
		e.wheel.Cancel(c.ackTimer)
		c.ackTimer = 0
	}
	e.ackQ.remove(c.idx)
}

// sendAck builds the ACK (or extended ACK, or owed NACK) of connection c.
func (e *Endpoint) sendAck(c *conn) bool {
	f := e.allocFrame()
	if f == mbuf.NoHandle {
		return false
	}
	hd := &e.txHdr
	*hd = wire.Header{
		Version:  wire.Version,
		DestCID:  c.peerCID,
		Type:     wire.TypeAck,
		ReqEBSN:  c.rx[0].bsn,
		DataEBSN: c.rx[1].bsn,
		TxTime:   e.now32,
	}
	owed, nack := c.nextNack()
	switch {
	case nack:
		hd.Type = wire.TypeNack
		hd.TxEcho = c.peerTx
		hd.Nack = wire.NackBody{
			Code:             owed.code,
			ULPCode:          owed.ulpCode,
			Window:           owed.window,
			PSN:              owed.psn,
			RNRTimeoutMicros: uint32(e.opts.RNRTimeout.Microseconds()),
		}
	default:
		if c.echoFresh {
			hd.TxEcho = c.echoTx
			hd.HopEcho = wire.HopsFromTTL(c.echoTTL)
			hd.Ack.RxTime = c.echoRx
		}
		hd.Ack.OOW = c.oow
		hd.Ack.OOWCount = c.oowCount
		if c.rx[0].holes() || c.rx[1].holes() {
			hd.Type = wire.TypeExtendedAck
			hd.Ack.ReqBitmap = c.rx[0].got.wireBits()
			hd.Ack.DataBitmap = c.rx[1].got.wireBits()
		}
	}
	n, err := c.tmpl.Encode(e.room(f), hd, nil)
	if err != nil {
		e.cnt.own[cInternal]++
		e.freeFrame(f)
		e.ackSent(c)
		return true
	}
	e.pool.SetLen(f, n)
	e.pending = append(e.pending, f)
	if nack {
		e.cnt.own[cTxNack]++
		c.nackSent()
		// An ACK may still be owed; it goes next.
		return true
	}
	if hd.Type == wire.TypeExtendedAck {
		e.cnt.own[cTxExtendedAck]++
	} else {
		e.cnt.own[cTxAck]++
	}
	c.stats.AcksSent++
	c.echoFresh = false
	e.ackSent(c)
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
