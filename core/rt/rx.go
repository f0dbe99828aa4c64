package rt

import (
	"time"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// receiveBurst processes the frames of one burst (Poll counts them in
// RxFrames and frees them once the burst is done). On an IPv4 endpoint the
// common frame (a reliable packet without extensions, to us, for a live
// connection) is decoded at fixed offsets; anything else, or anything
// wrong, takes receive, which decodes again and counts what is wrong: the
// fast path changes nothing before it has the connection.
func (e *Endpoint) receiveBurst(data [][]byte) {
	if !e.fast4 {
		for _, b := range data {
			e.receive(b)
		}
		return
	}
	hd := &e.frame.Header
	for _, b := range data {
		if payload, ok := wire.DecodeFastIPv4(b, e.localIP4, e.localPort, hd); ok {
			e.rxTTL = wire.FastIPv4TTL(b)
			if c := e.liveConn(hd.DestCID); c != nil {
				if c.state == StateEstablished && hd.Type != wire.TypeConnClose {
					e.onEstablishedData(c, hd, payload)
				} else {
					e.onPacket(c, hd, payload)
				}
				continue
			}
		}
		e.receive(b)
	}
}

// receive processes one frame with the general decoder. A frame that does
// not parse, is not for us, or names no live connection only bumps a
// counter.
func (e *Endpoint) receive(b []byte) {
	l4, ok := wire.L4Offset(b)
	if !ok {
		e.cnt.own[cRxNotTransport]++
		return
	}
	cid, ok := wire.PeekCID(b, l4)
	if !ok {
		if l4 <= len(b)-wire.UDPHeaderLen-4 {
			e.cnt.own[cRxBadVersion]++
		} else {
			e.cnt.own[cRxNotTransport]++
		}
		return
	}
	// The first word finds the connection before anything else is read.
	var c *conn
	if cid != 0 {
		if c = e.lookup(cid); c == nil {
			return
		}
	}
	f := &e.frame
	if err := f.Decode(b); err != nil {
		switch err {
		case wire.ErrChecksum:
			e.cnt.own[cRxBadChecksum]++
		case wire.ErrVersion:
			e.cnt.own[cRxBadVersion]++
		case wire.ErrNotIP, wire.ErrNotUDP, wire.ErrFragment:
			e.cnt.own[cRxNotTransport]++
		default:
			e.cnt.own[cRxMalformed]++
		}
		return
	}
	if f.DstPort != e.localPort || f.DstIP != e.localIP {
		e.cnt.own[cRxNotForUs]++
		return
	}
	e.rxTTL = f.TTL
	if c == nil {
		if f.Header.Type != wire.TypeConnOpen {
			e.cnt.own[cRxBadState]++
			return
		}
		e.onConnOpen(f)
		return
	}
	e.onPacket(c, &f.Header, f.Payload)
}

// onConnOpen answers an initiator: a repeated ConnOpen gets the same
// ConnAccept again; a new one gets a slot if the policy and the table
// allow, else a NACK.
func (e *Endpoint) onConnOpen(f *wire.Frame) {
	hd := &f.Header
	peerCID := hd.Ext.SourceCID
	if peerCID == 0 {
		e.cnt.own[cRxMalformed]++
		return
	}
	peer := PeerAddr{MAC: f.SrcMAC, IP: f.SrcIP, Port: f.SrcPort}
	key := openKey{PeerCID: peerCID, AddrHash: e.addrHash(peer.IP, peer.Port)}
	if idx, ok := e.openKeys.Lookup(key); ok {
		c := &e.conns[e.openConn[idx]]
		if c.peerCID != peerCID || c.peer.IP != peer.IP || c.peer.Port != peer.Port {
			// Two initiators whose keys collide: refuse the newcomer.
			e.reject(f, wire.NackResourceExhausted)
			return
		}
		e.cnt.own[cConnDupOpen]++
		c.peerTx = hd.TxTime
		// Accepting, or established while the initiator still missed
		// every ConnAccept (it ignores the repeat once established).
		e.wantCtrl(c, ctrlAccept)
		return
	}
	if e.opts.Accept != nil && !e.opts.Accept(peer) {
		e.reject(f, wire.NackULPFatal)
		return
	}
	c := e.allocConn()
	if c == nil {
		e.reject(f, wire.NackResourceExhausted)
		return
	}
	idx, err := e.openKeys.Insert(key)
	if err != nil {
		e.freeConns = append(e.freeConns, c.idx)
		c.state = StateFree
		e.reject(f, wire.NackResourceExhausted)
		return
	}
	e.openConn[idx] = c.idx
	c.openKey, c.hasOpenKey = key, true
	e.initConn(c, peer)
	c.peerCID = peerCID
	c.tx[0].reset(hd.ReqEBSN)
	c.tx[1].reset(hd.DataEBSN)
	c.peerTx = hd.TxTime
	c.state = StateAccepting
	c.handle = &Conn{e: e, c: c, cid: c.localCID, peer: peer}
	e.wantCtrl(c, ctrlAccept)
	e.cnt.own[cConnAccepted]++
}

// reject queues a NACK to an initiator we keep no connection for.
func (e *Endpoint) reject(f *wire.Frame, code wire.NackCode) {
	e.cnt.own[cConnRejected]++
	if e.nOrphans == maxOrphans {
		return
	}
	e.orphans[e.nOrphans] = orphanNack{
		addrs: wire.Addrs{
			SrcMAC: e.opts.LocalMAC, DstMAC: f.SrcMAC,
			SrcIP: e.localIP, DstIP: f.SrcIP,
			SrcPort: e.localPort, DstPort: f.SrcPort,
			NoUDPChecksum: e.opts.NoUDPChecksum,
		},
		destCID: f.Header.Ext.SourceCID,
		code:    code,
		echo:    f.Header.TxTime,
	}
	e.nOrphans++
}

// onPacket processes a decoded packet addressed to connection c.
func (e *Endpoint) onPacket(c *conn, hd *wire.Header, payload []byte) {
	switch c.state {
	case StateOpening:
		switch hd.Type {
		case wire.TypeConnAccept:
			e.onConnAccept(c, hd)
		case wire.TypeNack:
			e.cnt.own[cRxNack]++
			switch hd.Nack.Code {
			case wire.NackULPFatal:
				e.failConn(c, ErrRefused)
			case wire.NackResourceExhausted:
				// The peer is full for now: the setup timer retries.
			default:
				e.cnt.own[cRxBadState]++
			}
		default:
			e.cnt.own[cRxBadState]++
		}
		return
	case StateAccepting:
		if hd.Type == wire.TypeConnAccept || hd.Type == wire.TypeConnOpen {
			e.cnt.own[cRxBadState]++
			return
		}
		// Any packet to our CID proves the initiator got ConnAccept.
		e.establish(c)
	}
	c.peerTx = hd.TxTime
	switch hd.Type {
	case wire.TypeConnOpen:
		e.cnt.own[cRxBadState]++
	case wire.TypeConnAccept:
		if hd.Ext.SourceCID != c.peerCID {
			e.cnt.own[cRxBadState]++
			return
		}
		// A repeated ConnAccept: the target did not hear from us yet.
		e.cnt.own[cConnDupOpen]++
		e.ackNow(c)
	case wire.TypeAck, wire.TypeExtendedAck:
		e.onAck(c, hd)
	case wire.TypeNack:
		if !e.onNack(c, hd) {
			return // the connection failed
		}
	default:
		e.onData(c, hd, payload)
	}
	e.afterPacket(c)
}

// onEstablishedData is onPacket for the packet that carries nearly all
// traffic: a connection in StateEstablished receiving a reliable type
// other than ConnClose (wire.DecodeFastIPv4 lets through only reliable
// types without a body; ConnClose changes the connection's state and
// takes onPacket). It does what onPacket does for it, without the
// dispatch on state and type.
func (e *Endpoint) onEstablishedData(c *conn, hd *wire.Header, payload []byte) {
	c.peerTx = hd.TxTime
	e.onData(c, hd, payload)
	e.afterPacket(c)
}

// onData takes a packet with a PSN: what it acknowledges of ours, then the
// receiver rules.
func (e *Endpoint) onData(c *conn, hd *wire.Header, payload []byte) {
	if hd.ReqEBSN != c.tx[0].bsn || hd.DataEBSN != c.tx[1].bsn {
		e.piggyback(c, hd) // else it acknowledges nothing new
	}
	e.onReliable(c, hd, payload)
}

// afterPacket moves a closing connection on once a packet was handled.
func (e *Endpoint) afterPacket(c *conn) {
	if c.state == StateEstablished && !c.closeWanted && !c.peerClosing {
		return // progressClose would do nothing
	}
	e.progressClose(c)
}

// onConnAccept completes the initiator's side of the setup.
func (e *Endpoint) onConnAccept(c *conn, hd *wire.Header) {
	if hd.Ext.SourceCID == 0 {
		e.cnt.own[cRxMalformed]++
		return
	}
	c.peerCID = hd.Ext.SourceCID
	c.tx[0].reset(hd.ReqEBSN)
	c.tx[1].reset(hd.DataEBSN)
	if c.ctrlTries == 1 && hd.TxEcho == stamp(c.ctrlSentAt) {
		// Karn: only a ConnOpen sent once gives an unambiguous sample.
		c.rtt.sample(e.now.Sub(c.ctrlSentAt), &e.opts)
		e.cnt.own[cRTTSamples]++
	}
	c.peerTx = hd.TxTime
	e.establish(c)
	e.ackNow(c) // the third leg: tells the target we have its CID
}

// ackNow asks for an ACK in this Poll's transmit phase.
func (e *Endpoint) ackNow(c *conn) {
	c.ackNow = true
	e.ackQ.push(c.idx)
}

// piggyback applies the cumulative acknowledgement every packet carries.
func (e *Endpoint) piggyback(c *conn, hd *wire.Header) int {
	total := 0
	ebsn := [2]uint32{hd.ReqEBSN, hd.DataEBSN}
	for k := range 2 {
		if ebsn[k] == c.tx[k].bsn {
			continue // acknowledges nothing new (ack would change nothing)
		}
		newly, res := c.tx[k].ack(ebsn[k], nil, e.acked[:0])
		switch res {
		case ackStale:
			e.cnt.own[cAckStale]++
		case ackForged:
			e.cnt.own[cAckForged]++
		}
		e.retire(c, k, newly)
		total += len(newly)
	}
	return total
}

// onAck processes an ACK or extended ACK: both windows' BSNs and bitmaps,
// an RTT sample, and early retransmission of the holes it reveals.
func (e *Endpoint) onAck(c *conn, hd *wire.Header) {
	ext := hd.Type == wire.TypeExtendedAck
	if ext {
		e.cnt.own[cRxExtendedAck]++
	} else {
		e.cnt.own[cRxAck]++
	}
	c.stats.AcksReceived++
	ebsn := [2]uint32{hd.ReqEBSN, hd.DataEBSN}
	maps := [2]*wire.Bitmap128{&hd.Ack.ReqBitmap, &hd.Ack.DataBitmap}
	total, forged := 0, false
	for k := range 2 {
		var bm *wire.Bitmap128
		if ext {
			bm = maps[k]
		}
		newly, res := c.tx[k].ack(ebsn[k], bm, e.acked[:0])
		switch res {
		case ackStale:
			e.cnt.own[cAckStale]++
		case ackForged:
			e.cnt.own[cAckForged]++
			forged = true
		}
		e.retire(c, k, newly)
		total += len(newly)
	}
	var rtt time.Duration
	if hd.TxEcho != 0 && !forged {
		// Fabric RTT: our time since the echoed packet left, minus the
		// receiver's time between getting it and sending this ACK.
		round := e.now32 - hd.TxEcho
		turn := hd.TxTime - hd.Ack.RxTime
		if int32(round) >= 0 && int32(turn) >= 0 && turn <= round {
			rtt = time.Duration(round - turn)
			c.rtt.sample(rtt, &e.opts)
			e.cnt.own[cRTTSamples]++
			c.stats.PathHops = hd.HopEcho
			if c.hopCC != nil {
				c.hopCC.SetHops(int(hd.HopEcho))
			}
		}
	}
	c.cc.OnAck(e.now, rtt, total)
	if ext && c.state != StateFree {
		for k := range 2 {
			e.earlyRetransmit(c, k)
		}
	}
}

// onNack processes a NACK; it returns false if the connection failed.
func (e *Endpoint) onNack(c *conn, hd *wire.Header) bool {
	e.cnt.own[cRxNack]++
	e.piggyback(c, hd)
	n := &hd.Nack
	switch n.Code {
	case wire.NackReceiverNotReady, wire.NackResourceExhausted:
		d := max(time.Duration(n.RNRTimeoutMicros)*time.Microsecond, e.opts.TimerTick)
		e.holdOff(c, n.Window, n.PSN, d)
	case wire.NackOutOfWindow:
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
		ev := Event{Kind: EventNack, Conn: c.handle, Window: n.Window, PSN: n.PSN, Nack: *n}
		if idx, ok := e.retx.Lookup(cam.TransportKey{CID: c.localCID, Win: uint32(n.Window), PSN: n.PSN}); ok {
			ev.Cookie, ev.HasCookie = e.ctx[idx].cookie, true
		}
		e.emit(ev)
	}
	return true
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
	e.emit(Event{Kind: EventNack, Conn: c.handle, Window: n.Window, PSN: n.PSN, Nack: *n, Cookie: x.cookie, HasCookie: true})
	if c.state == StateFree {
		return // the handler dropped the connection
	}
	e.startResync(idx, x, c, wire.ResyncULPError)
}

// onReliable applies the receiver rules to a packet with a PSN.
func (e *Endpoint) onReliable(c *conn, hd *wire.Header, payload []byte) {
	w := hd.Window()
	rw := &c.rx[c.window(w)]
	class, off := rw.classify(hd.PSN)
	if class != rxNew {
		e.onNotNew(c, w, class)
		return
	}
	switch hd.Type {
	case wire.TypeResync:
		e.cnt.own[cRxResync]++
	case wire.TypeConnClose:
		c.peerClosing = true
		c.peerClose = hd.PSN
		c.peerDataEnd = hd.Offset
	default:
		if e.deliver != nil {
			if v := e.deliver(c.handle, hd, payload); v != Accept {
				e.onRefused(c, w, hd.PSN, v)
				return
			}
			if c.state == StateFree {
				return // the ULP's callback dropped the connection
			}
		}
		e.cnt.own[cRxDelivered]++
		c.stats.Delivered++
	}
	rw.accept(off)
	c.ackCount++
	if hd.Flags&wire.FlagRetransmission == 0 {
		c.echoTx, c.echoRx, c.echoFresh = hd.TxTime, e.now32, true
		c.echoTTL = e.rxTTL
	}
	switch {
	case hd.Flags&wire.FlagAckRequested != 0 || c.ackCount >= e.opts.AckEvery:
		if !c.ackNow { // else it is queued already
			e.ackNow(c)
		}
	case c.ackTimer == clock.NoTimer:
		// Armed once the burst is done (armAckTimers), unless an ACK is
		// owed by then anyway: most bursts bring AckEvery packets and
		// the timer would be cancelled in the same Poll.
		e.ackArmQ.push(c.idx)
	}
}

// onNotNew handles a packet the receive window does not take: before it
// (stale), past it, or already received; each is answered by an ACK.
func (e *Endpoint) onNotNew(c *conn, w wire.Window, class rxClass) {
	switch class {
	case rxStale:
		e.cnt.own[cRxStalePSN]++
	case rxBeyond:
		e.cnt.own[cRxOutOfWindow]++
		c.oow |= wire.OOWFlags(1) << c.window(w)
		if c.oowCount < ^uint16(0) {
			c.oowCount++
		}
	case rxDuplicate:
		e.cnt.own[cRxDuplicate]++
		c.stats.Duplicates++
	}
	e.ackNow(c)
}

// onRefused records the NACK owed for a packet the deliver function did
// not accept.
func (e *Endpoint) onRefused(c *conn, w wire.Window, psn uint32, v Verdict) {
	e.cnt.own[cRxRefused]++
	code := wire.NackReceiverNotReady
	switch v.kind() {
	case NoResources:
		code = wire.NackResourceExhausted
	case ULPError:
		code = wire.NackULPError
	}
	if v.kind() == ULPError {
		c.oweULPNack(pendingNack{code: code, ulpCode: v.ulpCode(), window: w, psn: psn})
	} else if c.nack.code == 0 {
		// One NACK at a time, for the first refusal: the sender holds
		// off that packet and every later one.
		c.nack = pendingNack{code: code, window: w, psn: psn}
	}
	e.ackNow(c)
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
