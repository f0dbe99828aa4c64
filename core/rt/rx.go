package rt

import (
	"encoding/binary"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/mbuf"
	"github.com/peregrine-net/peregrine/core/wire"
)

// touch reads the first cache lines of every frame of a burst, and their
// metadata, before any of them is processed: the loads do not depend on one
// another, so their cache misses overlap instead of stalling each packet in
// turn (DPDK applications prefetch their bursts for the same reason; Go has
// no prefetch instruction, so these are plain loads kept alive by a sink).
// The metadata of the whole burst is read first and the frames' lines
// after, so that no frame load waits for its metadata's miss; the packets
// found are returned (in rxData: valid until the burst's frames are freed)
// for receiveBurst, which then does not read the metadata again. It
// measured 12 ns per 64-byte-payload packet off the receive path, and the
// two passes 5 ns more.
func (e *Endpoint) touch(hs []mbuf.Handle) [][]byte {
	data := e.rxData[:len(hs)]
	for i, h := range hs {
		data[i] = e.pool.Data(h)
	}
	var x byte
	for _, b := range data {
		// The headers and a short payload; a long payload is read in order
		// by the checksum, which the hardware prefetcher follows. A frame
		// of touchLines lines or more gets straight loads (the loop's
		// bounds checks and branch cost more than the loads).
		if len(b) > (touchLines-1)*64 {
			x ^= b[0] ^ b[64] ^ b[2*64]
			continue
		}
		for i := 0; i < len(b); i += 64 {
			x ^= b[i]
		}
	}
	e.sink ^= x
	return data
}

// Offsets of the IPv4 source address and UDP source port in a frame
// wire.DecodeFastIPv4 accepted (untagged Ethernet, IPv4 without options).
const (
	fastSrcIP   = wire.EthHeaderLen + 12
	fastSrcPort = wire.EthHeaderLen + wire.IPv4HeaderLen
)

// touchLines is how many cache lines of each received frame touch reads:
// three hold every header and, for small packets, the whole frame.
const touchLines = 3

// receiveBurst processes the frames of one burst (Poll counts them in
// RxFrames and frees them once the burst is done). On an IPv4 endpoint the
// common frame (a reliable packet or an ACK with the data path's
// extensions, to us, for a live connection, from its peer's address) is
// decoded at fixed offsets; anything else, or anything wrong, takes
// receive, which decodes again and counts what is wrong: the fast path
// changes nothing before it has the connection.
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
			// The source check compares two words with the connection's:
			// DecodeFastIPv4's fixed layout puts the IPv4 source address
			// and the UDP source port at fixed offsets.
			if c := e.liveConn(hd.DestCID); c != nil &&
				binary.BigEndian.Uint32(b[fastSrcIP:]) == c.peerIP4 && binary.BigEndian.Uint16(b[fastSrcPort:]) == c.addrs.DstPort {
				if !e.unsealed(c, hd) {
					continue
				}
				if c.state == StateEstablished && hd.Type != wire.TypeConnClose && hd.Type.Window() != wire.WindowNone {
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
			e.answerBadCID(b, cid)
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
	if c != nil && (f.SrcIP != c.addrs.DstIP || f.SrcPort != c.addrs.DstPort && !sprayedFrom(f)) {
		// Not the connection's peer: an old incarnation's packet, or a
		// forgery. It may not touch the connection.
		e.cnt.own[cRxBadSource]++
		return
	}
	if c != nil && !e.checkQPN(c, &f.Header) {
		return // counted in QPNStats
	}
	if c == nil {
		switch {
		case f.Header.Type == wire.TypeConnOpen:
			e.onConnOpen(f)
		case f.Header.Type == wire.TypeNack && f.Header.Nack.Code == wire.NackBadCID && f.Header.Ext.Present&wire.ExtSourceCID != 0:
			e.onBadCIDNack(f)
		case isEarlyData(&f.Header):
			e.onEarlyData(f)
		default:
			e.cnt.own[cRxBadState]++
		}
		return
	}
	if !e.unsealed(c, &f.Header) {
		return
	}
	e.onPacket(c, &f.Header, f.Payload)
}

// answerBadCID answers a frame to CID cid, which names no connection
// here (lookup counted it), with a bad-CID NACK, so that its sender fails
// its half at once (a peer that restarted, or whose connection we
// aborted or timed out). Only a frame that decodes, is for us and is not
// a NACK itself is answered (a NACK never earns a NACK: two endpoints
// that both lost a connection would bounce them forever), and only while
// the token bucket allows.
func (e *Endpoint) answerBadCID(b []byte, cid uint32) {
	f := &e.frame
	if f.Decode(b) != nil || f.DstPort != e.localPort || f.DstIP != e.localIP || f.Header.Type == wire.TypeNack {
		return
	}
	if !e.badCIDToken() || e.nOrphans == maxOrphans {
		e.cnt.own[cBadCIDNackSuppressed]++
		return
	}
	e.orphans[e.nOrphans] = orphanNack{
		addrs:  e.orphanAddrs(f),
		srcCID: cid,
		code:   wire.NackBadCID,
		echo:   f.Header.TxTime,
	}
	e.nOrphans++
}

// badCIDToken takes a token from the bad-CID NACK bucket.
func (e *Endpoint) badCIDToken() bool {
	every := e.badCIDEvery
	if every == 0 {
		return false
	}
	if full := e.now.Add(-time.Duration(e.opts.BadCIDNackBurst) * every); e.badCIDAt < full {
		e.badCIDAt = full
	}
	if next := e.badCIDAt.Add(every); next <= e.now {
		e.badCIDAt = next
		return true
	}
	return false
}

// onBadCIDNack handles the peer's word that it has no connection for the
// CID we send to (f's source CID): it restarted, or dropped its half. The
// connection is found by that peer CID and the NACK's source address,
// which must both match, and fails with ErrPeerReset (a closed one that
// lingers is freed: its peer is done with it).
func (e *Endpoint) onBadCIDNack(f *wire.Frame) {
	e.cnt.own[cRxNack]++
	peerCID := f.Header.Ext.SourceCID
	idx, ok := e.openKeys.Lookup(openKey{PeerCID: peerCID, AddrHash: e.addrHash(f.SrcIP, f.SrcPort)})
	if !ok {
		e.cnt.own[cNackStale]++
		return
	}
	c := &e.conns[e.openConn[idx]]
	if c.peerCID != peerCID || c.addrs.DstIP != f.SrcIP || c.addrs.DstPort != f.SrcPort {
		e.cnt.own[cRxBadSource]++
		return
	}
	e.peerGone(c)
}

// peerGone ends a connection whose peer no longer knows it.
func (e *Endpoint) peerGone(c *conn) {
	if c.state == StateClosed {
		e.freeConn(c, StateClosed, nil)
		return
	}
	e.failConn(c, ErrPeerReset)
}

// onPacket processes a decoded packet addressed to connection c.
func (e *Endpoint) onPacket(c *conn, hd *wire.Header, payload []byte) {
	c.lastRx = e.now
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
		if !e.establish(c) {
			return
		}
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
// other than ConnClose (wire.DecodeFastIPv4 lets through the reliable
// types without a body, and ACKs, which take onPacket; ConnClose changes
// the connection's state and takes onPacket too). It does what onPacket does for it, without the
// dispatch on state and type.
func (e *Endpoint) onEstablishedData(c *conn, hd *wire.Header, payload []byte) {
	c.lastRx = e.now
	c.peerTx = hd.TxTime
	e.onData(c, hd, payload)
	e.afterPacket(c)
}

// onData takes a packet with a PSN: what it acknowledges of ours, then the
// receiver rules.
func (e *Endpoint) onData(c *conn, hd *wire.Header, payload []byte) {
	if hd.ReqEBSN != c.tx[0].bsn || hd.DataEBSN != c.tx[1].bsn { // else it acknowledges nothing new
		if !e.piggyback(c, hd) {
			return // the ULP, told of an ACK, ended the connection
		}
	}
	e.onReliable(c, hd, payload)
}

// onReliable applies the receiver rules to a packet with a PSN.
func (e *Endpoint) onReliable(c *conn, hd *wire.Header, payload []byte) {
	w := hd.Window()
	rw := &c.rx[c.window(w)]
	class, off := rw.classify(hd.PSN)
	if class != rxNew {
		if class != rxBeyond {
			e.pathNotNew(c, w, hd) // paths.go
		}
		e.onNotNew(c, w, hd.PSN, class)
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
		if e.ulp != nil {
			h := c.handle
			v := e.ulp.Deliver(h, hd, payload)
			if v == Drop {
				e.cnt.own[cRxDropped]++
				return
			}
			if c.handle != h {
				return // the ULP ended the connection (ULP: re-entrancy)
			}
			if v != Accept {
				e.onRefused(c, w, hd.PSN, hd.TxTime, v)
				return
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
// (stale), past it, or already received; each is answered by an ACK, and
// one we had already is reported in it (owedDup).
func (e *Endpoint) onNotNew(c *conn, w wire.Window, psn uint32, class rxClass) {
	switch class {
	case rxStale:
		e.cnt.own[cRxStalePSN]++
		e.owedDup(c, w, psn)
	case rxBeyond:
		e.cnt.own[cRxOutOfWindow]++
		c.oow |= wire.OOWFlags(1) << c.window(w)
		if c.oowCount < ^uint16(0) {
			c.oowCount++
		}
	case rxDuplicate:
		e.cnt.own[cRxDuplicate]++
		c.stats.Duplicates++
		e.owedDup(c, w, psn)
	}
	e.ackNow(c)
}

// onRefused records the NACK owed for a packet ULP.Deliver did
// not accept; echo is the packet's TxTime, which the NACK echoes.
func (e *Endpoint) onRefused(c *conn, w wire.Window, psn, echo uint32, v Verdict) {
	e.cnt.own[cRxRefused]++
	code := wire.NackReceiverNotReady
	switch v.kind() {
	case NoResources:
		code = wire.NackResourceExhausted
	case ULPError:
		code = wire.NackULPError
	case OutOfWindow:
		code = wire.NackOutOfWindow
	}
	if v.kind() == ULPError {
		c.oweULPNack(pendingNack{code: code, ulpCode: v.ulpCode(), window: w, psn: psn, echo: echo})
	} else if c.nack.code == 0 {
		// One NACK at a time, for the first refusal: the sender holds
		// off that packet and every later one.
		c.nack = pendingNack{code: code, window: w, psn: psn, echo: echo}
	}
	e.ackNow(c)
}

// afterPacket moves a closing connection on once a packet was handled.
func (e *Endpoint) afterPacket(c *conn) {
	if c.state == StateEstablished && !c.closeWanted && !c.peerClosing {
		return // progressClose would do nothing
	}
	e.progressClose(c)
}
