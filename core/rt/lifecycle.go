package rt

import (
	"encoding/binary"
	"net/netip"

	"github.com/peregrine-net/peregrine/cam"
	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/wire"
)

// Open starts a connection to peer: it takes a slot and a CID, and the
// next Poll sends ConnOpen, resent on a timer until ConnAccept arrives
// (EventEstablished) or RetryLimit runs out (EventFailed, ErrOpenTimeout).
func (e *Endpoint) Open(peer PeerAddr) (*Conn, error) {
	if e.stopped {
		return nil, ErrStopped
	}
	if !peer.IP.IsValid() || peer.IP.Unmap().Is4() != e.localIP.Is4() {
		return nil, ErrBadPeer
	}
	peer.IP = peer.IP.Unmap()
	c := e.allocConn()
	if c == nil {
		return nil, ErrTableFull
	}
	if !e.openQPN(c) {
		e.freeConns = append(e.freeConns, c.idx)
		return nil, ErrQPNTable
	}
	e.initConn(c, peer)
	c.state = StateOpening
	c.announce = true
	h := &Conn{e: e, c: c, cid: c.localCID, peer: peer}
	c.handle = h
	e.wantCtrl(c, ctrlOpen)
	e.cnt.own[cConnOpened]++
	e.publish()
	return h, nil
}

// allocConn takes a free slot under a new generation, reset.
func (e *Endpoint) allocConn() *conn {
	n := len(e.freeConns)
	if n == 0 {
		return nil
	}
	i := e.freeConns[n-1]
	e.freeConns = e.freeConns[:n-1]
	c := &e.conns[i]
	gen := c.gen + 1
	if gen > e.layout.genMax || gen == 0 {
		gen = 1
	}
	tx0, tx1, rx0, rx1 := c.tx[0].acked, c.tx[1].acked, c.rx[0].got, c.rx[1].got
	*c = conn{idx: i, gen: gen, localCID: e.layout.make(gen, i)}
	c.tx[0].acked, c.tx[1].acked, c.rx[0].got, c.rx[1].got = tx0, tx1, rx0, rx1
	for k := range 2 {
		clear(c.tx[k].acked)
		clear(c.rx[k].got)
	}
	return c
}

// initConn fills a fresh slot for peer: addresses, receive windows at
// their initial PSNs (announced to the peer in ConnOpen or ConnAccept),
// RTT estimator, congestion controller.
func (e *Endpoint) initConn(c *conn, peer PeerAddr) {
	c.peer = peer
	c.addrs = wire.Addrs{
		SrcMAC: e.opts.LocalMAC, DstMAC: peer.MAC,
		SrcIP: e.localIP, DstIP: peer.IP,
		SrcPort: e.localPort, DstPort: portOrDefault(peer.Port),
		NoUDPChecksum: e.opts.NoUDPChecksum,
	}
	// A template that fails to build (addresses EncodeFrame would refuse
	// too) stays zero, and every frame built on it fails as EncodeFrame's
	// would.
	c.tmpl, _ = wire.NewFrameTemplate(&c.addrs)
	l3 := wire.IPv4HeaderLen
	if peer.IP.Is6() {
		l3 = wire.IPv6HeaderLen
	}
	c.hdrOff = wire.EthHeaderLen + l3 + wire.UDPHeaderLen
	e.sealInit(c)
	if peer.IP.Is4() {
		b := peer.IP.As4()
		c.peerIP4 = binary.BigEndian.Uint32(b[:])
	}
	for k := range 2 {
		c.rx[k].bsn = e.initialPSN()
	}
	c.rtt.init(e.opts.InitialRTO)
	c.lastRx = e.now
	c.bornAt = e.now
	if e.opts.Congestion != nil {
		c.cc = e.opts.Congestion()
	}
	if c.cc == nil {
		c.fixed = FixedWindow{N: e.opts.MaxOutstanding}
		c.cc = &c.fixed
	}
	c.hopCC, _ = c.cc.(HopSetter)
}

func (e *Endpoint) initialPSN() uint32 {
	if e.opts.FixedInitialPSN {
		return e.opts.InitialPSN
	}
	return uint32(e.rng.Uint64())
}

// liveConn is lookup without counting a miss.
func (e *Endpoint) liveConn(cid uint32) *conn {
	i := e.layout.index(cid)
	if int(i) >= len(e.conns) {
		return nil
	}
	c := &e.conns[i]
	if c.state == StateFree || c.localCID != cid {
		return nil
	}
	return c
}

// lookup finds the live connection a CID names: an array index and a
// generation check.
func (e *Endpoint) lookup(cid uint32) *conn {
	i := e.layout.index(cid)
	if int(i) >= len(e.conns) {
		e.cnt.own[cRxUnknownCID]++
		return nil
	}
	c := &e.conns[i]
	if c.state == StateFree || c.localCID != cid {
		e.cnt.own[cRxStaleCID]++
		return nil
	}
	return c
}

func (e *Endpoint) addrHash(ip netip.Addr, port uint16) uint32 {
	b := ip.As16()
	lo := binary.BigEndian.Uint64(b[:8])
	hi := binary.BigEndian.Uint64(b[8:])
	return uint32(cam.HashWords(lo, hi^uint64(port), e.hashSeed))
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
		if c.peerCID != peerCID || c.addrs.DstIP != peer.IP || c.addrs.DstPort != peer.Port {
			// Two initiators whose keys collide: refuse the newcomer.
			e.reject(f, wire.NackResourceExhausted)
			return
		}
		// A ConnOpen rewritten in flight (other fields, same BSNs) that
		// set up a slot not yet established is replaced by the real one:
		// the initiator refuses the ConnAccept bound to the forgery.
		if c.accepted && c.openEBSN == [2]uint32{hd.ReqEBSN, hd.DataEBSN} && (c.state != StateAccepting || e.sameOpen(c, hd)) {
			e.cnt.own[cConnDupOpen]++
			c.peerTx = hd.TxTime
			// Accepting, or established while the initiator still missed
			// every ConnAccept (it ignores the repeat once established).
			e.wantCtrl(c, ctrlAccept)
			return
		}
		// The same CID from the same address, but not a repeat (other
		// initial BSNs, or a CID we know as the target's of a connection
		// we opened): the peer restarted and its old connection is a
		// zombie. End it, and take the new one — unless it is an old
		// early connect's copy, which may not end what came after it.
		if isEarlyOpen(hd) {
			if _, ok := e.earlyAdmit(f, peer); !ok {
				return
			}
		}
		e.peerGone(c)
	}
	if e.opts.Accept != nil && !e.opts.Accept(peer) {
		e.reject(f, wire.NackULPFatal)
		return
	}
	if e.qpn != nil && (hd.Ext.Present&wire.ExtQPN == 0 || hd.Ext.SrcQPN == 0) {
		e.qpn.own[qMissing]++ // a peer without QPNs: it cannot talk to us
		e.reject(f, wire.NackULPFatal)
		return
	}
	var rkey replayKey
	if isEarlyOpen(hd) {
		var ok bool
		if rkey, ok = e.earlyAdmit(f, peer); !ok {
			return // refused and counted (dcconnect.go, Replay)
		}
	}
	c := e.allocConn()
	if c == nil {
		e.reclaimSlots()
		e.reject(f, wire.NackResourceExhausted)
		return
	}
	if !e.openQPN(c) {
		e.freeConns = append(e.freeConns, c.idx)
		c.state = StateFree
		e.reject(f, wire.NackResourceExhausted)
		return
	}
	c.peerQPN = hd.Ext.SrcQPN
	idx, err := e.openKeys.Insert(key)
	if err != nil {
		e.closeQPN(c)
		e.freeConns = append(e.freeConns, c.idx)
		c.state = StateFree
		e.reject(f, wire.NackResourceExhausted)
		return
	}
	e.openConn[idx] = c.idx
	c.openKey, c.hasOpenKey = key, true
	if isEarlyOpen(hd) {
		e.replayCommit(rkey, hd, peer)
	}
	e.initConn(c, peer)
	c.accepted = true
	c.openEBSN = [2]uint32{hd.ReqEBSN, hd.DataEBSN}
	c.peerCID = peerCID
	c.tx[0].reset(hd.ReqEBSN)
	c.tx[1].reset(hd.DataEBSN)
	c.peerTx = hd.TxTime
	c.state = StateAccepting
	c.handle = &Conn{e: e, c: c, cid: c.localCID, peer: peer}
	e.wantCtrl(c, ctrlAccept)
	e.cnt.own[cConnAccepted]++
	e.sealPeer(c, hd)
	e.acceptEarly(c, hd)
}

// reject queues a NACK to an initiator we keep no connection for.
func (e *Endpoint) reject(f *wire.Frame, code wire.NackCode) {
	e.cnt.own[cConnRejected]++
	if e.nOrphans == maxOrphans {
		return
	}
	e.orphans[e.nOrphans] = orphanNack{
		addrs:   e.orphanAddrs(f),
		destCID: f.Header.Ext.SourceCID,
		code:    code,
		echo:    f.Header.TxTime,
	}
	e.nOrphans++
}

// orphanAddrs addresses a reply to f's sender.
func (e *Endpoint) orphanAddrs(f *wire.Frame) wire.Addrs {
	return wire.Addrs{
		SrcMAC: e.opts.LocalMAC, DstMAC: f.SrcMAC,
		SrcIP: e.localIP, DstIP: f.SrcIP,
		SrcPort: e.localPort, DstPort: f.SrcPort,
		NoUDPChecksum: e.opts.NoUDPChecksum,
	}
}

// onConnAccept completes the initiator's side of the setup.
func (e *Endpoint) onConnAccept(c *conn, hd *wire.Header) {
	if hd.Ext.SourceCID == 0 {
		e.cnt.own[cRxMalformed]++
		return
	}
	if !e.acceptSealed(c, hd) {
		return // counted; the setup timer resends ConnOpen
	}
	if !e.learnQPN(c, hd) {
		return // counted; the setup timer resends ConnOpen
	}
	c.peerCID = hd.Ext.SourceCID
	e.sealPeer(c, hd)
	// Registered by the peer's CID and address, as a target's connections
	// are: a bad-CID NACK from the peer names only those.
	key := openKey{PeerCID: c.peerCID, AddrHash: e.addrHash(c.addrs.DstIP, c.addrs.DstPort)}
	if idx, err := e.openKeys.Insert(key); err == nil {
		e.openConn[idx] = c.idx
		c.openKey, c.hasOpenKey = key, true
	}
	if !c.early.on {
		c.tx[0].reset(hd.ReqEBSN)
		c.tx[1].reset(hd.DataEBSN)
	}
	if c.ctrlTries == 1 && hd.TxEcho == stamp(c.ctrlSentAt) {
		// Karn: only a ConnOpen sent once gives an unambiguous sample.
		c.rtt.sample(e.now.Sub(c.ctrlSentAt), e.now, &e.opts)
		e.cnt.own[cRTTSamples]++
	}
	c.peerTx = hd.TxTime
	if !e.establish(c) {
		return
	}
	if c.early.on && !e.earlyAccepted(c, hd) {
		return
	}
	e.ackNow(c) // the third leg: tells the target we have its CID
}

// wantCtrl queues a connection-management packet.
func (e *Endpoint) wantCtrl(c *conn, k ctrlKind) {
	c.ctrl = k
	e.ctrlQ.push(c.idx)
}

// establish moves a connection to StateEstablished and tells the ULP. It
// reports false if the ULP ended the connection when told: the caller
// must not touch the slot then.
func (e *Endpoint) establish(c *conn) bool {
	c.state = StateEstablished
	e.stopCtrl(c)
	if next, ok := e.nextIdleCheck(c); ok {
		e.armCtrl(c, next)
	}
	c.announce = true
	e.cnt.own[cConnEstablished]++
	h := c.handle
	e.emit(Event{Kind: EventEstablished, Conn: h})
	return c.handle == h
}

func (e *Endpoint) stopCtrl(c *conn) {
	if c.ctrlTimer != clock.NoTimer {
		e.wheel.Cancel(c.ctrlTimer)
		c.ctrlTimer = clock.NoTimer
	}
	c.ctrl = ctrlNone
	e.ctrlQ.remove(c.idx)
}

// Close starts closing the connection: a ConnClose goes out in the
// request window behind every packet already sent, the peer answers with
// its own, and once both are acknowledged the connection is StateClosed
// (EventClosed). Sends fail with ErrClosed from now on. A connection still
// being set up is dropped at once. Close is idempotent.
func (h *Conn) Close() error {
	c := h.live()
	if c == nil {
		return nil
	}
	e := h.e
	switch c.state {
	case StateOpening, StateAccepting:
		e.freeConn(c, StateClosed, nil)
		e.cnt.own[cConnClosed]++
		e.emit(Event{Kind: EventClosed, Conn: h})
	case StateEstablished:
		c.closeWanted = true
		e.progressClose(c)
	}
	e.publish()
	return nil
}

// Abort drops the connection at once without telling the peer: every
// unacknowledged packet is discarded (its cookie is not handed back: the
// connection's end covers it) and the slot is freed; the handle reads
// StateFailed, ErrAborted. The ULP then gets EventFailed (ULP.Event) with
// Err ErrAborted, before Abort returns and on the calling (polling)
// goroutine, exactly once, so the layer above fails the connection's
// operations as for any other failure. (A target's connection the ULP
// never heard of, still StateAccepting, is dropped without an event.) Use
// it when the peer is known to be gone; the peer learns of it from the
// bad-CID NACK its next packet earns, or its idle timeout. Abort is
// idempotent: a second call, or one on a connection already ended, does
// nothing.
func (h *Conn) Abort() {
	if c := h.live(); c != nil {
		h.e.failConn(c, ErrAborted)
		h.e.publish()
	}
}

// SetAwaiting tells the transport whether the ULP awaits the peer on this
// connection: the peer holds the next move (a pull's data, a grant, a
// push's data after our grant, a completion, a peer's request being
// served) and nothing of the ULP's own is pending there. While set, a
// peer silent for an RTO is probed (an ACK asking for an ACK, counted in AwaitProbes), the
// interval doubling per probe of this wait, answered or not, up to
// MaxRTO (a thousand connections waiting on a busy live peer would
// otherwise spend the transmit budget on probes), and after
// RetryLimit+1 unanswered probes the connection fails with
// ErrRetryExhausted — as it would had a packet been outstanding. A peer
// that dropped its half answers the first probe with a bad-CID NACK
// (ErrPeerReset). Without it, a side that only waits (its requests all
// acknowledged) would find a peer that is gone only by the keepalive and
// idle timeout (Options.KeepAlive, IdleTimeout: seconds, not MaxRTOs). It
// sends nothing while the peer talks, and nothing on a connection with no
// work in progress. (A closing connection whose own ConnClose was
// acknowledged waits for the peer's the same way, without being told.)
//
// Set it only while the ULP has nothing of its own to send there: work
// still queued behind the ULP's scheduler (its fair share among many
// connections, a full window, pacing) is not the peer's silence — probing
// it answers nothing, and with many connections the probes and their
// answers take the transmit budget from the work. Packets outstanding
// need it neither: each has its retransmission timer, which finds a peer
// gone. Silence is measured from the call that turns it on, so call it on
// transitions only (each turn-on re-arms the connection's liveness timer;
// a repeat does nothing, turning off costs nothing). The transaction
// layer sets it when a connection holds a transaction and has nothing
// queued, in its grant queue or unacknowledged, and clears it otherwise
// (core/rt/txn await.go).
func (h *Conn) SetAwaiting(on bool) {
	c := h.live()
	if c == nil || c.awaiting == on {
		return
	}
	c.awaiting = on
	if !on {
		return // the timer, if it runs, finds nothing to do
	}
	e := h.e
	// Silence is measured from now: work that starts on a connection quiet
	// for long is not a reason to probe at once.
	c.probesOut, c.probeAt, c.probeExp = 0, e.now, 0
	if c.state == StateEstablished || c.state == StateClosing {
		if next, ok := e.nextIdleCheck(c); ok {
			e.armCtrl(c, next)
		}
	}
}

// progressClose moves a connection through its close: to StateClosing
// once a close is wanted (locally or by the peer's ConnClose), queuing our
// ConnClose behind every earlier request, and to StateClosed once both
// directions are done.
func (e *Endpoint) progressClose(c *conn) {
	switch c.state {
	case StateEstablished:
		if !c.closeWanted && !c.peerClosed() {
			return
		}
		c.state = StateClosing
		c.closeWanted = true
	case StateClosing:
	default:
		return
	}
	if !c.closeSent {
		// Offset carries our final data-window NSN: Send is refused from
		// now on, so the peer knows when it has all our data.
		sh := SendHeader{Type: wire.TypeConnClose, Flags: wire.FlagAckRequested, Offset: c.tx[1].nsn}
		if _, err := e.enqueue(c, wire.WindowRequest, &sh, nil); err != nil {
			e.wantCtrl(c, ctrlClose)
			return
		}
		c.closeSent = true
	}
	if c.txIdle() && c.peerClosed() {
		c.state = StateClosed
		e.stopCtrl(c)
		e.armCtrl(c, e.now.Add(e.opts.CloseLinger))
		e.cnt.own[cConnClosed]++
		e.emit(Event{Kind: EventClosed, Conn: c.handle})
		return
	}
	if c.closeSent && c.txIdle() && !c.closeWait {
		// Our side is done; only the peer's ConnClose is missing, and no
		// timer of ours runs any more. Wait for it as for any awaited
		// peer: a silent peer is probed, and one that gave up its half
		// answers with a bad-CID NACK.
		c.closeWait = true
		c.probesOut, c.probeAt, c.probeExp = 0, e.now, 0
		if next, ok := e.nextIdleCheck(c); ok {
			e.armCtrl(c, next)
		}
	}
}

// reclaimSlots answers a ConnOpen that found the table full: every
// connection silent for an RTO is probed at once and then as an awaited
// peer is (until it answers), so that the halves of peers that restarted
// (their answer is a bad-CID NACK) or vanished (RetryLimit+1 probes go
// unanswered) free their slots within a few round trips, and the
// initiator's next ConnOpen (its setup timer resends it) finds room. A
// full table of live connections stays as it is: each answers. At most
// one pass over the table per InitialRTO.
func (e *Endpoint) reclaimSlots() {
	if e.now < e.reclaimAt {
		return
	}
	e.reclaimAt = e.now.Add(e.opts.InitialRTO)
	for i := range e.conns {
		c := &e.conns[i]
		if c.state != StateEstablished && c.state != StateClosing || c.reclaim || e.now.Sub(c.lastRx) < c.rtt.rto {
			continue
		}
		c.reclaim = true
		c.probe = true
		e.ackNow(c)
		c.probesOut, c.probeAt, c.probeExp = 1, e.now, 1
		e.cnt.own[cReclaimProbes]++
		if next, ok := e.nextIdleCheck(c); ok {
			e.armCtrl(c, next)
		}
	}
}

// closeUnacked ends a close whose last ConnClose was never acknowledged:
// the peer's close arrived complete and everything else we sent was
// acknowledged, so nothing is lost; the peer most likely finished and
// freed its side (its linger ran out while our ACKs or its were lost).
func (e *Endpoint) closeUnacked(c *conn) {
	h := c.handle
	e.freeConn(c, StateClosed, nil)
	e.cnt.own[cConnClosed]++
	e.emit(Event{Kind: EventClosed, Conn: h})
}

// failConn drops a connection and reports why.
func (e *Endpoint) failConn(c *conn, err error) {
	if err == ErrRetryExhausted || err == ErrIdleTimeout || err == ErrOpenTimeout {
		e.tellGone(c)
	}
	h, announce := c.handle, c.announce
	e.freeConn(c, StateFailed, err)
	e.cnt.own[cConnFailed]++
	if announce {
		e.emit(Event{Kind: EventFailed, Conn: h, Err: err})
	}
}

// tellGone tells the peer of a connection this side gives up on that its
// half is gone: the bad-CID NACK it would earn with its next frame, sent
// now (a restarted peer's is sent the same way), so that a peer with
// nothing outstanding — which would never send that frame — ends its half
// at once, if the path to it works; if not, its own timers do. It names
// our CID, which the peer finds its connection by; it is rate-limited with
// the other bad-CID NACKs.
func (e *Endpoint) tellGone(c *conn) {
	if !e.badCIDToken() || e.nOrphans == maxOrphans {
		e.cnt.own[cBadCIDNackSuppressed]++
		return
	}
	e.orphans[e.nOrphans] = orphanNack{addrs: c.addrs, srcCID: c.localCID, code: wire.NackBadCID, echo: c.peerTx}
	e.nOrphans++
	e.cnt.own[cGiveUpNotices]++
}

// freeConn releases everything a connection holds and returns its slot.
// The handle keeps the final state; the CID goes stale.
func (e *Endpoint) freeConn(c *conn, final State, err error) {
	e.closeQPN(c)
	for k := range 2 {
		w := wire.Window(k + 1)
		tw := &c.tx[k]
		tw.unacked(tw.inFlight(), func(psn uint32) bool {
			if idx, ok := e.retx.Delete(cam.TransportKey{CID: c.localCID, Win: uint32(w), PSN: psn}); ok {
				e.releaseCtx(idx)
			} else {
				e.cnt.own[cInternal]++
			}
			return true
		})
		tw.reset(tw.nsn)
	}
	if c.ackTimer != clock.NoTimer {
		e.wheel.Cancel(c.ackTimer)
		c.ackTimer = clock.NoTimer
	}
	e.stopCtrl(c)
	e.ackQ.remove(c.idx)
	e.ackArmQ.remove(c.idx)
	if c.hasOpenKey {
		e.openKeys.Delete(c.openKey)
		c.hasOpenKey = false
	}
	if h := c.handle; h != nil {
		h.finalStats = h.Stats()
		h.finalPeerCID = c.peerCID
		h.final, h.err = final, err
		c.handle = nil
	}
	c.state = StateFree
	e.freeConns = append(e.freeConns, c.idx)
}
