package rt

import (
	"time"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

// validAck checks both windows' halves of an acknowledgement before
// either is applied: one forged half makes the whole frame a lie, and it
// then changes nothing (counted once, in AckForged).
func (e *Endpoint) validAck(c *conn, hd *wire.Header, ext bool) bool {
	ebsn := [2]uint32{hd.ReqEBSN, hd.DataEBSN}
	maps := [2]*wire.Bitmap128{&hd.Ack.ReqBitmap, &hd.Ack.DataBitmap}
	for k := range 2 {
		var bm *wire.Bitmap128
		if ext {
			bm = maps[k]
		}
		if c.tx[k].check(ebsn[k], bm) == ackForged {
			e.cnt.own[cAckForged]++
			return false
		}
	}
	return true
}

// piggyback applies the cumulative acknowledgement every packet carries
// (validAck first: a forged one is ignored whole). It reports false if the
// ULP, told of an acknowledged packet, ended the connection: the packet
// that carried the acknowledgement must not touch the slot then.
func (e *Endpoint) piggyback(c *conn, hd *wire.Header) bool {
	if !e.validAck(c, hd, false) {
		return true
	}
	h := c.handle
	total := 0
	ebsn := [2]uint32{hd.ReqEBSN, hd.DataEBSN}
	for k := range 2 {
		if ebsn[k] == c.tx[k].bsn {
			continue // acknowledges nothing new (ack would change nothing)
		}
		newly, res := c.tx[k].ack(ebsn[k], nil, e.acked[:0])
		if res == ackStale {
			e.cnt.own[cAckStale]++
		}
		e.retire(c, k, newly)
		if c.handle != h {
			return false
		}
		total += len(newly)
	}
	if total > 0 {
		for k := range 2 {
			e.detectLoss(c, k) // the ACK a data packet carries moves the RACK marks too
		}
	}
	return true
}

// onAck processes an ACK or extended ACK: both windows' BSNs and bitmaps,
// an RTT sample, and early retransmission of the holes it reveals. A
// forged one (validAck) changes nothing: no window, no RTT sample, no
// congestion signal, no early retransmission.
func (e *Endpoint) onAck(c *conn, hd *wire.Header) {
	ext := hd.Type == wire.TypeExtendedAck
	if ext {
		e.cnt.own[cRxExtendedAck]++
	} else {
		e.cnt.own[cRxAck]++
	}
	c.stats.AcksReceived++
	if !e.validAck(c, hd, ext) {
		return
	}
	if hd.Flags&wire.FlagAckRequested != 0 {
		// A keepalive or a timeout's ask: the answer echoes it, unless a
		// packet since our last ACK gives a fresher echo — after a stall
		// of our loop the first copies waiting behind the ask span the
		// stall, the sample a spurious timeout learns from — or it is no
		// later than what we echoed last: a replayed ask's echo would be
		// an old time, a round trip of the replay's age in the peer's
		// RTT estimate. (After 2 s without an echo the 32-bit times
		// compare either way: an ask then unanswered by its echo falls
		// back to its timeout's resend.)
		if !c.echoFresh && (c.echoTx == 0 || int32(hd.TxTime-c.echoTx) > 0) {
			c.echoTx, c.echoRx, c.echoFresh = hd.TxTime, e.now32, true
			c.echoTTL = e.rxTTL
		}
		e.ackNow(c)
	}
	for k := range c.rtt.frto {
		// The answer to a timeout's ask: it echoes the ask or something
		// sent after it (frtoVerdict).
		if f := &c.rtt.frto[k]; f.asked && hd.TxEcho != 0 && int32(hd.TxEcho-f.askStamp) >= 0 {
			f.answered = true
		}
	}
	ebsn := [2]uint32{hd.ReqEBSN, hd.DataEBSN}
	maps := [2]*wire.Bitmap128{&hd.Ack.ReqBitmap, &hd.Ack.DataBitmap}
	h := c.handle
	total := 0
	for k := range 2 {
		var bm *wire.Bitmap128
		if ext {
			bm = maps[k]
		}
		newly, res := c.tx[k].ack(ebsn[k], bm, e.acked[:0])
		if res == ackStale {
			e.cnt.own[cAckStale]++
		}
		e.retire(c, k, newly)
		if c.handle != h {
			return // the ULP ended the connection
		}
		total += len(newly)
	}
	if hd.Ack.Dup != wire.WindowNone {
		e.onDupReport(c, hd.Ack.Dup, hd.PSN)
	}
	var rtt time.Duration
	if hd.TxEcho != 0 {
		// Fabric RTT: our time since the echoed packet left, minus the
		// receiver's time between getting it and sending this ACK.
		round := e.now32 - hd.TxEcho
		turn := hd.TxTime - hd.Ack.RxTime
		// An echo from the future, a turnaround longer than the round trip,
		// or a round trip longer than the connection has existed cannot
		// echo a packet we sent: no sample.
		if int32(round) >= 0 && int32(turn) >= 0 && turn <= round && time.Duration(round) <= e.now.Sub(c.bornAt) {
			rtt = time.Duration(round - turn)
			c.rtt.sample(rtt, e.now, &e.opts)
			e.cnt.own[cRTTSamples]++
			c.stats.PathHops = hd.HopEcho
			if c.hopCC != nil {
				c.hopCC.SetHops(int(hd.HopEcho))
			}
		}
	}
	for k := range 2 {
		e.frtoVerdict(c, k, rtt) // before OnAck: a spurious timeout's response is taken back first
	}
	c.cc.OnAck(e.now, rtt, total)
	for k := range 2 {
		e.detectLoss(c, k)
	}
}

// onNack processes a NACK; it returns false if the connection failed. A
// NACK whose piggybacked BSNs are forged, or that names a PSN never sent,
// is forged: counted (AckForged) and ignored whole. One that names a PSN
// already acknowledged, or before its own eBSN (the receiver has it
// since), is stale: counted (NackStale) and its code ignored.
func (e *Endpoint) onNack(c *conn, hd *wire.Header) bool {
	e.cnt.own[cRxNack]++
	n := &hd.Nack
	if !e.validAck(c, hd, false) {
		return true
	}
	namesPSN := n.Code != wire.NackBadCID && n.Code != wire.NackULPFatal
	if namesPSN {
		if n.Window != wire.WindowRequest && n.Window != wire.WindowData {
			e.cnt.own[cAckForged]++
			return true
		}
		if e.nackForged(c, n) {
			e.cnt.own[cAckForged]++
			return true
		}
	}
	if !e.piggyback(c, hd) {
		return false // the ULP ended the connection
	}
	if namesPSN {
		own := hd.ReqEBSN
		if n.Window == wire.WindowData {
			own = hd.DataEBSN
		}
		tw := &c.tx[c.window(n.Window)]
		off := n.PSN - tw.bsn
		if int32(n.PSN-own) < 0 || int32(off) < 0 || tw.acked.has(off) {
			e.cnt.own[cNackStale]++
			return true
		}
		if !e.nackBound(c, hd) {
			return true
		}
	}
	h := c.handle
	switch n.Code {
	case wire.NackReceiverNotReady, wire.NackResourceExhausted:
		// Capped at MaxRTO: a peer's announced delay (up to an hour in
		// the field) must not hold a packet longer than a timeout would.
		d := min(max(time.Duration(n.RNRTimeoutMicros)*time.Microsecond, e.opts.TimerTick), e.opts.MaxRTO)
		e.holdOff(c, n.Window, n.PSN, d)
		// News for the ULP (a Send finding no receive buffer counts its
		// RNR NACKs), not a resolution: no cookie.
		e.emit(Event{Kind: EventNack, Conn: c.handle, Window: n.Window, PSN: n.PSN, Nack: *n})
	case wire.NackOutOfWindow:
		e.refund(c, n.Window, n.PSN)
		e.holdOff(c, n.Window, n.PSN, c.rtt.rto)
	case wire.NackBadCID:
		e.failConn(c, ErrPeerReset)
		return false
	case wire.NackULPFatal:
		e.failConn(c, ErrPeerFatal)
		return false
	case wire.NackULPError:
		e.onULPError(c, n)
	default:
		// News for the ULP, not a resolution: the packet stays outstanding
		// (the transport still references its buffer) and its cookie comes
		// back once, when it resolves, so the event carries none.
		e.emit(Event{Kind: EventNack, Conn: c.handle, Window: n.Window, PSN: n.PSN, Nack: *n})
	}
	return c.handle == h // else the ULP ended the connection
}

// nackForged reports whether a NACK names a PSN of its window that was
// never sent: at or past NSN, or assigned but not transmitted yet.
func (e *Endpoint) nackForged(c *conn, n *wire.NackBody) bool {
	tw := &c.tx[c.window(n.Window)]
	off := n.PSN - tw.bsn
	if int32(off) < 0 {
		return false // before the window: acknowledged already (stale)
	}
	if off >= tw.inFlight() {
		return true
	}
	if tw.acked.has(off) {
		return false
	}
	idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(n.Window), PSN: n.PSN})
	return !ok || e.ctx[idx].sends == 0
}

// nackBound reports whether a NACK that names an outstanding PSN of ours
// names the packet we sent with it: its TxEcho is the TxTime of the
// refused packet, which must be one of that PSN's last two transmissions.
// A PSN alone is not enough: a forged packet with a live CID and our next
// PSN, refused by the peer, earns a NACK with that PSN, and it may reach
// us just after our own packet with that PSN left — taken for ours, it
// would fail an operation the peer served. A mismatch is counted
// (NackForged) and the NACK ignored whole. A NACK for a resync's PSN
// refuses the packet the resync replaced: stale (NackStale). (A refusal
// of a transmission older than the last two, overtaken by two resends,
// is ignored too: the packet is outstanding and resent anyway.)
func (e *Endpoint) nackBound(c *conn, hd *wire.Header) bool {
	n := &hd.Nack
	idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(n.Window), PSN: n.PSN})
	if !ok {
		e.cnt.own[cInternal]++ // nackForged found it outstanding
		return false
	}
	x := &e.ctx[idx]
	if x.resync {
		e.cnt.own[cNackStale]++
		return false
	}
	if hd.TxEcho == stamp(x.sentAt) || x.prevAt != 0 && hd.TxEcho == stamp(x.prevAt) {
		return true
	}
	e.cnt.own[cNackForged]++
	return false
}

// onULPError resolves a packet the peer's ULP refused: the ULP hears of it
// once (EventNack with its cookie) and a resync takes its place. A NACK for
// a packet no longer outstanding, or already replaced, is a repeat.
func (e *Endpoint) onULPError(c *conn, n *wire.NackBody) {
	idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(n.Window), PSN: n.PSN})
	if !ok || e.ctx[idx].resync {
		e.cnt.own[cNackStale]++
		return
	}
	x := &e.ctx[idx]
	x.nacked = true
	h := c.handle
	e.emit(Event{Kind: EventNack, Conn: h, Window: n.Window, PSN: n.PSN, Nack: *n, Cookie: x.cookie, HasCookie: true})
	if c.handle != h {
		return // the ULP ended the connection
	}
	e.startResync(idx, x, c, wire.ResyncULPError)
}

// retire releases the contexts of PSNs of window k that an ACK just
// acknowledged and tells the ULP of each. If the ULP, told of one, ends
// the connection (c.handle is no longer h), the rest are released
// untold: the window had marked them acknowledged already, so freeing the
// connection did not, and the connection's end covers their cookies.
func (e *Endpoint) retire(c *conn, k int, newly []uint32) {
	w := wire.Window(k + 1)
	h, cid := c.handle, c.localCID
	for i, psn := range newly {
		idx, ok := e.retx.Delete(cam.TransportKey{CID: cid, Win: uint32(w), PSN: psn})
		if !ok {
			e.cnt.own[cInternal]++
			continue
		}
		x := &e.ctx[idx]
		e.rackAcked(c, k, x)
		e.pathAcked(c, x)
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
		case e.ulp != nil:
			e.ulp.Acked(h, w, psn, cookie)
		}
		if c.handle != h {
			for _, psn := range newly[i+1:] {
				if idx, ok := e.retx.Delete(cam.TransportKey{CID: cid, Win: uint32(w), PSN: psn}); ok {
					e.releaseCtx(idx)
					e.cnt.own[cAckRetired]++
				} else {
					e.cnt.own[cInternal]++
				}
			}
			return
		}
	}
}

// ackNow asks for an ACK in this Poll's transmit phase.
func (e *Endpoint) ackNow(c *conn) {
	c.ackNow = true
	e.ackQ.push(c.idx)
}

// armAckTimers arms the delayed-ACK timer of every connection that asked
// for one during the burst and still needs it: it received packets since
// its last ACK, owes no ACK already (ackNow: it goes out in this Poll's
// transmit phase) and has no timer. The deadline is the one onReliable
// would have used (e.now does not move during a Poll).
func (e *Endpoint) armAckTimers() {
	for e.ackArmQ.len() > 0 {
		c := &e.conns[e.ackArmQ.pop()]
		if c.state == StateFree || c.ackNow || c.ackCount == 0 || c.ackTimer != clock.NoTimer {
			continue
		}
		id, err := e.wheel.Arm(e.now.Add(e.opts.AckDelay), uint64(timerAck)<<32|uint64(uint32(c.idx)))
		if err != nil {
			e.cnt.own[cInternal]++
			e.ackNow(c)
			continue
		}
		c.ackTimer = id
	}
}

// piggybacked notes that a packet to the peer carried our receive BSNs: a
// pending ACK that would say no more is not needed.
func (e *Endpoint) piggybacked(c *conn) {
	if c.ackCount == 0 && !c.ackNow {
		return
	}
	if c.rx[0].holes() || c.rx[1].holes() || c.oow != 0 || c.nack.code != 0 || c.nULPNack != 0 || c.probe || c.dupWin != 0 {
		return
	}
	e.ackSent(c)
}

// ackSent resets the ACK coalescing state after an ACK went out.
func (e *Endpoint) ackSent(c *conn) {
	c.ackCount = 0
	c.ackNow = false
	c.probe = false
	c.oow, c.oowCount = 0, 0
	c.dupWin = wire.WindowNone
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
		hd.TxEcho = owed.echo
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
		if c.probe {
			hd.Flags |= wire.FlagAckRequested
		}
		if c.dupWin != wire.WindowNone {
			hd.Ack.Dup, hd.PSN = c.dupWin, c.dupPSN
			e.cnt.own[cTxDupReport]++
		}
		if c.rx[0].holes() || c.rx[1].holes() {
			hd.Type = wire.TypeExtendedAck
			hd.Ack.ReqBitmap = c.rx[0].got.wireBits()
			hd.Ack.DataBitmap = c.rx[1].got.wireBits()
		}
	}
	c.seal(hd, 0)
	n, err := c.tmpl.Encode(e.room(f), hd, nil)
	if err != nil {
		e.cnt.own[cInternal]++
		e.freeFrame(f)
		e.ackSent(c)
		return true
	}
	c.steerAck(e.room(f)[:n]) // paths.go
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
