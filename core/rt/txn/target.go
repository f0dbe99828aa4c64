package txn

import (
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// Request is what the target ULP sees of a peer's request (OnRequest).
type Request struct {
	Conn *Conn
	Kind OpKind
	RSN  uint32
	// Region is the region and address the initiator named; Data is that
	// span of the region: the bytes a push placed, or those a pull is
	// about to read. Valid during the call only.
	Region wire.RegionRef
	Data   []byte
}

// deliver is the transport's deliver function: every reliable packet of
// the transaction protocol, exactly once.
func (e *Endpoint) deliver(rc *rt.Conn, h *wire.Header, p []byte) rt.Verdict {
	ci, c := e.connOf(rc)
	if c == nil {
		// Established on the transport but no slot here: refuse for good.
		e.cnt.own[cConnRefused]++
		return rt.ULPError
	}
	if e.ioiForgedPhase(h) {
		return rt.Drop // no sender builds it: the packet that holds this PSN still comes
	}
	if h.Offset == abortOffset && len(p) == 0 {
		switch h.Type {
		case wire.TypePushUnsolicitedData, wire.TypePushRequest, wire.TypePullRequest, wire.TypePullData:
			return e.onAbortNotice(ci, c, h)
		}
	}
	switch h.Type {
	case wire.TypePushUnsolicitedData:
		return e.onPushData(ci, c, h, p, false)
	case wire.TypePushSolicitedData:
		return e.onPushData(ci, c, h, p, true)
	case wire.TypePushRequest:
		return e.onPushRequest(ci, c, h)
	case wire.TypePullRequest:
		return e.onPullRequest(ci, c, h)
	case wire.TypePullData:
		return e.onPullData(c, h, p)
	case wire.TypePushGrant:
		return e.onGrant(ci, c, h)
	case wire.TypeSend:
		return e.onSend(ci, c, h, p)
	}
	e.cnt.own[cMalformed]++
	return rt.Drop
}

// span checks the region a request names.
func (e *Endpoint) span(h *wire.Header, access Access) ([]byte, Refusal) {
	if h.Ext.Present&wire.ExtRegion == 0 {
		return nil, RefusalUnregistered
	}
	return e.regions.span(h.Ext.Region.Key, h.Ext.Region.Addr, h.ReqLen, access)
}

// refuse answers a request whose region is refused. The request still
// takes its turn in the peer's order (so later ones are not held up
// forever): a failed context is recorded and released in order without
// reaching the ULP. If even that has no room, the packet is refused for
// now and comes back.
func (e *Endpoint) refuse(ci int32, c *conn, h *wire.Header, why Refusal) rt.Verdict {
	kind := OpPush
	if h.Type == wire.TypePullRequest {
		kind = OpPull
	}
	if v := e.placeholder(ci, c, h, kind, h.Type == wire.TypePushRequest, why); v != rt.Accept {
		return v
	}
	switch why {
	case RefusalUnregistered:
		e.cnt.own[cRefusedUnregistered]++
	case RefusalAccess:
		e.cnt.own[cRefusedAccess]++
	default:
		e.cnt.own[cRefusedTooSmall]++
	}
	return rt.ULPErrorCode(uint8(why))
}

// placeholder records a failed target context for a request that has
// none (refused, or given up by the initiator before it arrived), so that
// it takes its turn in the peer's RSN order (an ordered connection) and
// SSN order (a solicited push) and is released without reaching the ULP.
// It answers rt.NoResources when there is no room (the packet comes
// back), else rt.Accept.
func (e *Endpoint) placeholder(ci int32, c *conn, h *wire.Header, kind OpKind, solicited bool, why Refusal) rt.Verdict {
	needRSN := c.peerOrdered && !seqLT(h.RSN, c.reqBase)
	if needRSN {
		if _, ok := e.ro.Lookup(c.cid, spacePeerRSN, h.RSN); ok {
			needRSN = false // recorded by an earlier copy or segment
		}
	}
	needSSN := solicited && !seqLT(h.SSN, c.ssnBase)
	if needSSN {
		if _, ok := e.ro.Lookup(c.cid, spacePeerSSN, h.SSN); ok {
			needSSN = false
		}
	}
	if !needRSN && !needSSN {
		return rt.Accept
	}
	if !e.admissible(needRSN && h.RSN != c.reqBase || needSSN && h.SSN != c.ssnBase, 2) {
		return rt.NoResources
	}
	i, x := e.allocX(ci, roleTarget)
	e.setState(x, targetFailed)
	x.why, x.placeheld = why, true
	x.kind, x.solicited, x.length = kind, solicited, h.ReqLen
	x.rsn, x.ssn = h.RSN, h.SSN
	if needRSN {
		_ = e.register(i, c.cid, spacePeerRSN, h.RSN)
		x.rsnHeld = true
	}
	if needSSN {
		_ = e.register(i, c.cid, spacePeerSSN, h.SSN)
		x.ssnHeld = true
		e.ro.MarkReady(c.ssnBase, c.cid, spacePeerSSN, h.SSN)
		e.queueGrants(c)
	}
	if needRSN {
		e.requestComplete(ci, c, i)
	}
	return rt.Accept
}

// headReserve is how many contexts (and twice as many reorder entries)
// only a peer's request at the head of its orders may take: see
// admissible.
const headReserve = 1

// admissible reports whether a peer's new request may take a context and
// entries reorder entries. One that waits for an earlier request of its
// connection before it can go anywhere (waits: a later RSN on an ordered
// connection, a later SSN of a solicited push) may not take the last
// headReserve of them: requests that arrived early could otherwise hold
// every context while the one they all wait for is refused (NoResources)
// for want of one, forever — an RNR storm that never ends. A request at the
// head of its orders is released or granted as soon as it is complete, so
// the contexts kept for it always come back.
func (e *Endpoint) admissible(waits bool, entries int) bool {
	free, room := len(e.freeX), e.ro.Cap()-e.ro.Len()
	if waits {
		free, room = free-headReserve, room-2*headReserve
	}
	return free > 0 && room >= entries
}

// onPushData places a push segment in the region it names.
func (e *Endpoint) onPushData(ci int32, c *conn, h *wire.Header, p []byte, solicited bool) rt.Verdict {
	if !solicited {
		c.peerOrdered = h.Flags.Has(wire.FlagOrdered)
	}
	if uint64(h.Offset)+uint64(len(p)) > uint64(h.ReqLen) {
		e.cnt.own[cMalformed]++
		return rt.ULPError
	}
	if !solicited && h.Offset == 0 && uint64(len(p)) == uint64(h.ReqLen) && h.Phase == wire.PhaseNone &&
		!h.Flags.Has(wire.FlagIOIInOrder) && e.ro.Held(spacePeerRSN) == 0 && (!c.peerOrdered || h.RSN == c.reqBase) {
		return e.pushWhole(ci, c, h, p)
	}
	var x *xact
	i := int32(-1)
	if k, ok := e.ro.Lookup(c.cid, spacePeerRSN, h.RSN); ok {
		i = e.byEntry[k]
		x = &e.xacts[i]
		if x.state == targetFailed {
			// The request was refused already (an earlier segment); refuse
			// every segment of it the same way.
			return e.refuse(ci, c, h, x.why)
		}
		if x.kind != OpPush || x.solicited != solicited || x.length != h.ReqLen {
			// A segment that contradicts its transaction: refused for good,
			// so the initiator's operation fails rather than completing.
			e.cnt.own[cMalformed]++
			return rt.ULPError
		}
		if solicited && !x.granted {
			// Data before its grant: no sender does that (forged).
			e.cnt.own[cUnmatched]++
			return rt.Drop
		}
	} else if solicited {
		// Data of no request here: every packet of a released request
		// came already, and no copy follows an abort notice (forged).
		e.cnt.own[cUnmatched]++
		return rt.Drop
	}
	span, why := e.span(h, RemoteWrite)
	if why != refuseNone {
		if x != nil {
			e.setState(x, targetFailed)
			x.why = why
			e.requestComplete(ci, c, i)
		}
		return e.refuse(ci, c, h, why)
	}
	if x == nil {
		if e.ioiUnknown(h) {
			return rt.Drop // forged (see ioiUnknown): not acknowledged
		}
		if c.peerOrdered && seqLT(h.RSN, c.reqBase) {
			// A segment of a request released already (forged): see above.
			e.cnt.own[cUnmatched]++
			return rt.Drop
		}
		if !e.admissible(c.peerOrdered && h.RSN != c.reqBase, 1) {
			return rt.NoResources
		}
		i, x = e.allocX(ci, roleTarget)
		x.kind, x.rsn, x.length, x.remote = OpPush, h.RSN, h.ReqLen, h.Ext.Region
		x.mem = span
		_ = e.register(i, c.cid, spacePeerRSN, h.RSN)
		x.rsnHeld = true
	}
	if v, ok := e.ioiAdmit(c, i, x, h, p); !ok {
		return v
	}
	copy(x.mem[h.Offset:], p)
	x.received += uint32(len(p))
	e.cnt.own[cBytesPlaced] += uint64(len(p))
	if solicited {
		n := min(uint32(len(p)), x.grantLeft)
		x.grantLeft -= n
		e.granted -= int(n)
	}
	if x.received == x.length {
		e.requestComplete(ci, c, i)
	}
	return rt.Accept
}

// pushWhole places and releases an unsolicited push that came whole in
// one packet, in order if its connection is ordered, while the reorder
// engine holds none of the peers' requests: no entry can match it and none
// waits behind it, so the engine's lookup, insert and delete (a fifth of
// the CPU of a 64 B push at both ends, the lookup a cache miss in a
// target's large table) are skipped. It answers as onPushData does.
func (e *Endpoint) pushWhole(ci int32, c *conn, h *wire.Header, p []byte) rt.Verdict {
	span, why := e.span(h, RemoteWrite)
	if why != refuseNone {
		return e.refuse(ci, c, h, why)
	}
	if !e.admissible(false, 1) {
		return rt.NoResources
	}
	// Released as it is placed, it needs no context either: what release
	// does for a push, without one to allocate, link, clear and free.
	copy(span, p)
	e.cnt.own[cBytesPlaced] += uint64(len(p))
	if c.peerOrdered {
		c.reqBase++ // what the engine's PopReady did
	}
	e.cnt.own[cRequestsDelivered]++
	if e.opts.OnRequest != nil {
		r := &e.req // field by field, as allocX fills a context
		r.Conn, r.Kind, r.RSN = c.handle, OpPush, h.RSN
		r.Region, r.Data = h.Ext.Region, span
		e.opts.OnRequest(r)
		e.req = Request{}
	}
	return rt.Accept
}

// admit takes a new single-packet request from the peer (a push request
// or a pull request): its region must allow access, it must be neither a
// repeat nor one already released, and a context and entries reorder
// entries must be free. It returns the new target context (RSN, length,
// region and span filled in), or nil and the verdict for the packet.
func (e *Endpoint) admit(ci int32, c *conn, h *wire.Header, access Access, entries int) (int32, *xact, rt.Verdict) {
	c.peerOrdered = h.Flags.Has(wire.FlagOrdered)
	span, why := e.span(h, access)
	if why != refuseNone {
		return -1, nil, e.refuse(ci, c, h, why)
	}
	if _, ok := e.ro.Lookup(c.cid, spacePeerRSN, h.RSN); ok || c.peerOrdered && seqLT(h.RSN, c.reqBase) {
		// A second request under one RSN (a request is one packet, and
		// the transport passes each PSN once): forged, not acknowledged.
		e.cnt.own[cUnmatched]++
		return -1, nil, rt.Drop
	}
	waits := c.peerOrdered && h.RSN != c.reqBase || h.Type == wire.TypePushRequest && h.SSN != c.ssnBase
	if !e.admissible(waits, entries) {
		return -1, nil, rt.NoResources
	}
	i, x := e.allocX(ci, roleTarget)
	x.rsn, x.length, x.remote, x.mem = h.RSN, h.ReqLen, h.Ext.Region, span
	return i, x, rt.Accept
}

// onPushRequest records a solicited push and queues it for a grant in SSN
// order.
func (e *Endpoint) onPushRequest(ci int32, c *conn, h *wire.Header) rt.Verdict {
	i, x, v := e.admit(ci, c, h, RemoteWrite, 2)
	if x == nil {
		return v
	}
	x.kind, x.solicited, x.ssn = OpPush, true, h.SSN
	_ = e.register(i, c.cid, spacePeerRSN, h.RSN)
	_ = e.register(i, c.cid, spacePeerSSN, h.SSN)
	x.rsnHeld, x.ssnHeld = true, true
	e.ro.MarkReady(c.ssnBase, c.cid, spacePeerSSN, h.SSN)
	e.queueGrants(c)
	return rt.Accept
}

// queueGrants moves the solicited pushes that are next in SSN order to the
// connection's grant queue, and the connection into the grant round.
func (e *Endpoint) queueGrants(c *conn) {
	for {
		k, ok := e.ro.PopReady(c.cid, spacePeerSSN, &c.ssnBase)
		if !ok {
			return
		}
		i := e.byEntry[k]
		x := &e.xacts[i]
		x.ssnHeld = false
		if x.state == targetFailed {
			e.maybeFreeTarget(i)
			continue
		}
		x.grantNext = -1
		x.grantQ = true
		if c.grantTail >= 0 {
			e.xacts[c.grantTail].grantNext = i
		} else {
			c.grantHead = i
		}
		c.grantTail = i
		if !c.inGrantRound {
			c.inGrantRound = true
			e.grants.push(uint64(c.gen)<<32 | uint64(uint32(x.conn)))
		}
	}
}

// issueGrants grants queued solicited pushes, one per connection in turn
// (so every initiator progresses), while the bytes granted and not yet
// received stay within IncastCap (a push larger than the cap goes alone).
func (e *Endpoint) issueGrants() int {
	n := 0
	for {
		ck, ok := e.grants.peek()
		if !ok {
			return n
		}
		ci := int32(uint32(ck))
		c := &e.conns[ci]
		if !c.live || uint64(c.gen) != ck>>32 || c.grantHead < 0 {
			e.grants.pop()
			if c.live && uint64(c.gen) == ck>>32 {
				c.inGrantRound = false
			}
			continue
		}
		i := c.grantHead
		x := &e.xacts[i]
		if x.state != targetFailed {
			if e.granted > 0 && e.granted+int(x.length) > e.opts.IncastCap {
				return n
			}
			if !e.enqueue(ci, sched.ClassData, i) {
				return n
			}
			x.granted = true
			x.grantLeft = x.length
			e.granted += int(x.length)
			if g := uint64(e.granted); g > e.cnt.own[cGrantedMax] {
				e.cnt.own[cGrantedMax] = g
			}
			n++
		}
		c.grantHead = x.grantNext
		x.grantQ = false
		if c.grantHead < 0 {
			c.grantTail = -1
		}
		e.grants.pop()
		if c.grantHead >= 0 {
			e.grants.push(ck) // to the back of the round
		} else {
			c.inGrantRound = false
		}
		if x.state == targetFailed {
			e.maybeFreeTarget(i)
		}
	}
}

// onPullRequest records a pull; it is complete at once and is served when
// its turn comes.
func (e *Endpoint) onPullRequest(ci int32, c *conn, h *wire.Header) rt.Verdict {
	i, x, v := e.admit(ci, c, h, RemoteRead, 1)
	if x == nil {
		return v
	}
	x.kind = OpPull
	x.pkts = e.packets(x.length)
	_ = e.register(i, c.cid, spacePeerRSN, h.RSN)
	x.rsnHeld = true
	e.requestComplete(ci, c, i)
	return rt.Accept
}

// requestComplete releases a peer's request that has all it needs, in
// RSN order on an ordered connection.
func (e *Endpoint) requestComplete(ci int32, c *conn, i int32) {
	x := &e.xacts[i]
	if !c.peerOrdered {
		e.ro.Take(c.cid, spacePeerRSN, x.rsn)
		x.rsnHeld = false
		e.release(ci, c, i)
		return
	}
	e.ro.MarkReady(c.reqBase, c.cid, spacePeerRSN, x.rsn)
	for {
		k, ok := e.ro.PopReady(c.cid, spacePeerRSN, &c.reqBase)
		if !ok {
			return
		}
		j := e.byEntry[k]
		e.xacts[j].rsnHeld = false
		e.release(ci, c, j)
	}
}

// release hands a complete request to the target ULP: a push is done, a
// pull starts sending its data.
func (e *Endpoint) release(ci int32, c *conn, i int32) {
	x := &e.xacts[i]
	if x.kind == OpSend {
		e.sendReleased(ci, i) // recvq.go
		return
	}
	if x.state == targetFailed {
		if x.aborted && e.opts.OnAborted != nil {
			e.req = Request{Conn: c.handle, Kind: x.kind, RSN: x.rsn, Region: x.remote, Data: x.mem}
			e.opts.OnAborted(&e.req)
			e.req = Request{}
		}
		e.maybeFreeTarget(i)
		return
	}
	e.setState(x, targetReleased)
	e.cnt.own[cRequestsDelivered]++
	if e.opts.OnRequest != nil {
		e.req = Request{Conn: c.handle, Kind: x.kind, RSN: x.rsn, Region: x.remote, Data: x.mem}
		e.opts.OnRequest(&e.req)
		e.req = Request{}
	}
	if x.kind == OpPush {
		e.maybeFreeTarget(i)
		return
	}
	if !e.enqueue(ci, sched.ClassData, i) {
		// The store holds 2×MaxOps items and each transaction queues at
		// most one at a time.
		e.setState(x, targetFailed)
		e.maybeFreeTarget(i)
	}
}

// maybeFreeTarget frees target context i if the free rule (freeable)
// says it may go.
func (e *Endpoint) maybeFreeTarget(i int32) {
	x := &e.xacts[i]
	if !x.freeable() {
		return
	}
	ci := x.conn
	e.freeXact(i)
	e.maybeClose(ci)
}

func seqLT(a, b uint32) bool { return int32(a-b) < 0 }

// heldAtEnd tells the target ULP (OnAborted) of peer request i of
// connection c, which ends with the connection, if the ULP was never told
// of it and would have been: a push or pull waiting for its turn or its
// data (its initiator may have seen every packet of it acknowledged), or
// one its initiator gave up on. Refused requests and placeholders stay
// untold, as they always are; a Send's WQE is flushed instead.
func (e *Endpoint) heldAtEnd(c *conn, i int32) {
	x := &e.xacts[i]
	if !x.rsnHeld || x.placeheld || x.kind == OpSend || x.state == targetFailed && !x.aborted {
		return
	}
	e.cnt.own[cHeldAtEnd]++
	if e.opts.OnAborted == nil {
		return
	}
	c.closing = true // the ULP may not post on a connection that is going
	e.req = Request{Conn: c.handle, Kind: x.kind, RSN: x.rsn, Region: x.remote, Data: x.mem}
	e.opts.OnAborted(&e.req)
	e.req = Request{}
}
