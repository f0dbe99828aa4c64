package txn

import (
	"errors"
	"strconv"
	"time"

	"github.com/peregrine-net/peregrine/core/clock"
	"github.com/peregrine-net/peregrine/core/rt"
	"github.com/peregrine-net/peregrine/core/wire"
	"github.com/peregrine-net/peregrine/sched"
)

// ErrNoOp is returned by Cancel for an RSN that names no operation still
// in progress on the connection (never posted, completed, or whose
// completion is decided and waits only for its turn).
var ErrNoOp = errors.New("txn: no operation in progress with that RSN (completed already, or never posted)")

// The abort notice is how one end tells the other that it gave up on a
// transaction, so that the other end frees what it holds for it and lets
// the transactions behind it through. It is a reliable packet of the
// transaction's own type (the initiator: push unsolicited data, push
// request or pull request; the target: pull data) with no payload and
// Offset abortOffset, which no segment can have (a message is at most
// MaxMessage bytes).
const abortOffset = ^uint32(0)

// noticeBit marks the cookie of an abort notice, so its resolution is not
// taken for one of the transaction's own packets; grantBit that of a
// grant. Context indexes stay below 2^20 (MaxOps).
const (
	noticeBit = 1 << 31
	grantBit  = 1 << 30
)

// grantResolved is the transport's verdict on target context i's grant.
// An abandoned grant may never have reached the initiator, whose push
// would then wait for it forever: it is sent again unless the data came
// or the request ended (a grant the initiator has already is matched to
// nothing there and dropped).
func (e *Endpoint) grantResolved(i int32, x *xact, st Status) {
	x.unresolved--
	if st == StatusAbandoned && x.state != targetFailed && x.received < x.length && !x.inSched {
		if e.enqueue(x.conn, sched.ClassData, i) {
			e.cnt.own[cGrantsResent]++
		}
	}
	e.maybeFreeTarget(i)
}

// noticeState is where a context's abort notice stands.
type noticeState uint8

const (
	noticeNone   noticeState = iota
	noticeWanted             // queued in the scheduler, not yet sent
	noticeOut                // handed to the transport, not yet resolved
	noticeDone               // acknowledged (or refused) by the peer
	// noticeHeld: owed, but queued only once the packets given up at the
	// operation's timeout or cancel resolved, so that no late copy of one
	// can reach the target after the notice freed what it held.
	noticeHeld
)

// ConnEventKind says what a ConnEvent reports.
type ConnEventKind uint8

const (
	// ConnEstablished: the connection carries operations now (on the
	// target, this is how the ULP first learns of it). RDMA_CM_EVENT_ESTABLISHED.
	ConnEstablished ConnEventKind = iota + 1
	// ConnFailed: the connection ended without a clean close; Err says
	// why (rt.ErrRetryExhausted, rt.ErrPeerReset, rt.ErrOpenTimeout,
	// rt.ErrAborted after Abort, rt.ErrStopped after Stop…). Every
	// operation of it has completed (StatusConnFailed or StatusFlushed)
	// before the event. IBV_EVENT_QP_FATAL.
	ConnFailed
	// ConnClosed: the connection closed cleanly (Close, or the peer's);
	// every operation of it completed first. RDMA_CM_EVENT_DISCONNECTED.
	ConnClosed
)

func (k ConnEventKind) String() string {
	switch k {
	case ConnEstablished:
		return "established"
	case ConnFailed:
		return "failed"
	case ConnClosed:
		return "closed"
	}
	return "ConnEventKind(" + strconv.Itoa(int(k)) + ")"
}

// ConnEvent reports a change of a connection (Options.OnConnEvent).
type ConnEvent struct {
	Kind ConnEventKind
	// Conn is the connection's handle; after ConnFailed and ConnClosed it
	// is no longer live (compare it, do not post on it).
	Conn *Conn
	Err  error // ConnFailed: why
}

func (e *Endpoint) emitConn(kind ConnEventKind, h *Conn, err error) {
	if e.opts.OnConnEvent != nil {
		e.opts.OnConnEvent(ConnEvent{Kind: kind, Conn: h, Err: err})
	}
}

// Cancel ends the operation posted on the connection under rsn: it
// completes with StatusCancelled at once (in posting order on an ordered
// connection: in its turn), without waiting for the peer. Its packets
// still unacknowledged are given up (rt.Conn.Abandon: a resync takes the
// place of each, so the transport no longer references a push's source),
// and nothing more is written into a pull's destination from the moment
// Cancel returns: its local buffer is the caller's again when Cancel
// returns (and the completion is polled). Once those resyncs are
// acknowledged the target is told to drop the transaction
// (Options.OnAborted there); a push may have been placed there in part or
// whole, a pull served.
func (h *Conn) Cancel(rsn uint32) error {
	h.e.unpublished = true
	c := h.live()
	if c == nil {
		return ErrClosed
	}
	e := h.e
	k, ok := e.ro.Lookup(c.cid, spaceRSN, rsn)
	if !ok {
		return ErrNoOp
	}
	i := e.byEntry[k]
	x := &e.xacts[i]
	if !x.live || x.role != roleInitiator || x.state != initActive {
		return ErrNoOp
	}
	e.cnt.own[cCancelled]++
	e.stopOp(i, StatusCancelled)
	return nil
}

// Abort ends the connection at once: the transport drops every packet of
// it (rt.Conn.Abort), then every operation still in progress completes
// with StatusFlushed (those whose completion was decided keep their
// status), in posting order, the peer's requests are dropped, and
// OnConnEvent gets ConnFailed with rt.ErrAborted. Every buffer of the
// connection is the caller's again when Abort returns. The peer learns of
// it only by its own failure detection (its retries or its keepalive).
func (h *Conn) Abort() error {
	h.e.unpublished = true
	c := h.live()
	if c == nil {
		return ErrClosed
	}
	c.aborting = true
	// The transport may report the abort as EventFailed: the teardown it
	// triggers flushes, since aborting is set, and then this one finds
	// the connection gone.
	c.rc.Abort()
	if h.live() != nil {
		h.e.teardown(h.idx, rt.ErrAborted)
	}
	return nil
}

// stopOp ends initiator operation i with st (a timeout or a cancel): it
// takes its queued packet out of the scheduler, lets the grant order pass
// its SSN, gives up its packets still unresolved in the transport (resyncs
// take their places at once, so the transport references its buffer no
// more), and completes it — at once, or in its turn on an ordered
// connection — without waiting for the peer.
func (e *Endpoint) stopOp(i int32, st Status) {
	x := &e.xacts[i]
	x.status = st
	e.stop(x)
	if x.inSched {
		e.unqueue(x.conn, i)
	}
	if x.solicited && !x.granted && x.ssnHeld {
		e.skipGrant(i, x)
	}
	why := wire.ResyncTimeout
	if st == StatusCancelled {
		why = wire.ResyncAborted
	}
	if e.giveUp(i, x, why) {
		e.checkDone(i)
	}
}

// giveUp gives up initiator operation i's packets still unresolved in the
// transport (rt.Conn.Abandon): a resync takes the place of each, so the
// transport references the operation's buffer no more, and the
// operation may complete without waiting for them. It reports false if
// the transport failed the connection meanwhile (its teardown completed
// the operation).
func (e *Endpoint) giveUp(i int32, x *xact, why wire.ResyncCode) bool {
	if x.unresolved == 0 || x.givenUp {
		return true
	}
	gen := x.gen
	// Packets resynced already (retries ran out, or refused) hold no
	// buffer either, so every unresolved packet is covered.
	e.conns[x.conn].rc.Abandon(x.cookie(i), ioiCookieBits, why)
	if !x.live || x.gen != gen {
		return false
	}
	x.givenUp = true
	return true
}

// givenUpResolved follows a packet that stopOp gave up, whose resync the
// transport just resolved, of an operation completed (or decided)
// already: once the last one resolved, the operation's notice goes out
// (the target can no longer receive any of its packets, see noticeHeld),
// or its context is freed if it owes none.
func (e *Endpoint) givenUpResolved(i int32, x *xact) {
	if x.unresolved > 0 {
		return
	}
	if x.notice == noticeHeld {
		x.notice = noticeNone
		e.queueNotice(i, sched.ClassRequest)
		return
	}
	if x.state == initCompleted && !x.noticePending() {
		ci := x.conn
		e.freeXact(i)
		e.maybeClose(ci)
	}
}

// unqueue takes transaction i's item out of connection ci's scheduler
// queues, keeping the order of the others.
func (e *Endpoint) unqueue(ci int32, i int32) {
	e.sch.Drop(int(ci), func(cl sched.Class, item uint32) {
		j := int32(item)
		if j == i {
			return
		}
		_ = e.sch.Enqueue(int(ci), cl, item, e.firstCost(&e.xacts[j])) // the slot it just left is free
	})
	e.xacts[i].inSched = false
}

// armTimeout starts initiator operation i's timeout, if it has one.
func (e *Endpoint) armTimeout(i int32, x *xact, d time.Duration) {
	if d <= 0 {
		return
	}
	id, err := e.wheel.Arm(e.now.Add(d), x.cookie(i))
	if err != nil {
		return // the wheel holds MaxOps timers, one per context: cannot happen
	}
	x.timer = id
}

// fireTimeout is the timer wheel's callback: operation cookie timed out.
func (e *Endpoint) fireTimeout(_ clock.TimerID, cookie uint64) {
	i, x := e.byCookie(cookie)
	if x == nil || x.role != roleInitiator {
		return
	}
	x.timer = clock.NoTimer
	if x.deferred {
		e.cnt.own[cTimedOut]++
		e.expireHeld(x.conn, i) // cq.go
		return
	}
	if x.state == initDone || x.state == initCompleted {
		return // its completion is decided already
	}
	if x.stopped() {
		// Its status is decided (a packet refused or abandoned) but other
		// packets of it are still in flight: they end now, so that the
		// operation ends by its deadline with the status it has.
		if e.giveUp(i, x, wire.ResyncTimeout) {
			e.checkDone(i)
		}
		return
	}
	e.cnt.own[cTimedOut]++
	e.stopOp(i, StatusTimeout)
}

// needsNotice reports whether a stopped initiator operation must tell the
// target: it ended for a reason of this side (abandoned, timed out,
// cancelled) and the target may hold something for it (a context, a
// grant, its place in the request or grant order).
func (e *Endpoint) needsNotice(x *xact) bool {
	if x.kind == OpSend {
		return sendNeedsNotice(x.status)
	}
	switch x.status {
	case StatusAbandoned, StatusTimeout, StatusCancelled:
	default:
		return false
	}
	return e.conns[x.conn].ordered || x.solicited || x.reqSent || x.sentPkts > 0
}

// queueNotice queues context i's abort notice in class cl.
func (e *Endpoint) queueNotice(i int32, cl sched.Class) {
	x := &e.xacts[i]
	if x.notice == noticeWanted || x.notice == noticeOut {
		return
	}
	x.notice = noticeWanted
	if x.inSched {
		return // the item queued already sends the notice when picked
	}
	if !e.enqueue(x.conn, cl, i) {
		x.notice = noticeNone // 2×MaxOps items, one per context: cannot happen
	}
}

// noticePacket describes context x's abort notice in sh.
func (e *Endpoint) noticePacket(c *conn, x *xact, i int32, sh *rt.SendHeader) {
	sh.RSN, sh.SSN, sh.ReqLen, sh.Offset = x.rsn, x.ssn, x.length, abortOffset
	sh.Cookie = x.cookie(i) | noticeBit
	sh.Flags |= wire.FlagAckRequested
	if x.kind == OpSend {
		e.sendNoticePacket(x.conn, x, sh)
		return
	}
	if x.role == roleTarget {
		sh.Type = wire.TypePullData
		return
	}
	sh.Ext = wire.Ext{Present: wire.ExtRegion, Region: x.remote}
	if c.ordered {
		sh.Flags |= wire.FlagOrdered
	}
	switch {
	case x.kind == OpPull:
		sh.Type = wire.TypePullRequest
	case x.solicited:
		sh.Type = wire.TypePushRequest
	default:
		sh.Type = wire.TypePushUnsolicitedData
	}
}

// noticeResolved is the transport's verdict on context i's abort notice:
// acknowledged or refused (the peer has it, or will never take it),
// or abandoned (sent again).
func (e *Endpoint) noticeResolved(i int32, x *xact, st Status) {
	if x.notice != noticeOut {
		return
	}
	if st == StatusAbandoned {
		x.notice = noticeNone
		if x.noticeResends == 0 {
			x.noticeSince = e.now
		}
		if x.noticeResends < ^uint8(0) {
			x.noticeResends++
		}
		ro := e.rt.Options()
		budget := time.Duration(ro.RetryLimit+1) * ro.MaxRTO
		if int(x.noticeResends) > ro.RetryLimit && e.now.Sub(x.noticeSince) >= budget {
			// A notice is a reliable packet like any other: abandoned
			// more than RetryLimit times, over at least as long as one
			// packet's retries can take (a fault that loses the peer's
			// refusals for a while is not this), the peer is not taking
			// it, and the connection gives up (after this Poll's
			// transport work, see giveUpPending).
			e.giveUpConn(x.conn)
			return
		}
		cl := sched.ClassRequest
		if x.role == roleTarget {
			cl = sched.ClassData
		}
		e.queueNotice(i, cl)
		return
	}
	x.notice = noticeDone
	e.cnt.own[cNoticesAcked]++
	if x.role == roleTarget {
		e.maybeFreeTarget(i)
		return
	}
	if x.owesTurn {
		x.owesTurn = false
		e.noticeReached(x.conn) // cq.go
	}
	if x.state == initCompleted && x.live {
		ci := x.conn
		e.freeXact(i)
		e.maybeClose(ci)
	}
}

// noticePending reports whether context x still owes or awaits its notice.
func (x *xact) noticePending() bool {
	return x.notice == noticeWanted || x.notice == noticeOut || x.notice == noticeHeld
}

// onAbortNotice handles the peer's abort notice for one of its requests
// (on the target) or for one of our pulls (on the initiator).
func (e *Endpoint) onAbortNotice(ci int32, c *conn, h *wire.Header) rt.Verdict {
	e.cnt.own[cNoticesReceived]++
	if h.Type == wire.TypePullData {
		// The target abandoned our pull's data.
		k, ok := e.ro.Lookup(c.cid, spaceRSN, h.RSN)
		if !ok {
			e.cnt.own[cUnmatched]++
			return rt.Accept
		}
		i := e.byEntry[k]
		x := &e.xacts[i]
		if x.kind != OpPull || x.state != initActive {
			e.cnt.own[cUnmatched]++
			return rt.Accept
		}
		e.fail(i, StatusRemoteAbandoned)
		return rt.Accept
	}
	c.peerOrdered = h.Flags.Has(wire.FlagOrdered)
	for i := c.head; i >= 0; i = e.xacts[i].next {
		x := &e.xacts[i]
		if x.role != roleTarget || x.rsn != h.RSN {
			continue
		}
		if x.state == targetFailed {
			return rt.Accept // refused already, or an earlier copy of the notice
		}
		e.setState(x, targetFailed)
		x.aborted = true
		if x.granted && x.grantLeft > 0 {
			e.granted -= int(x.grantLeft)
			x.grantLeft = 0
		}
		if x.rsnHeld {
			e.requestComplete(ci, c, i) // its turn passes; release tells OnAborted
		} else {
			e.maybeFreeTarget(i)
		}
		return rt.Accept
	}
	// Nothing of it arrived (or it was released already): hold its place
	// in the orders it still has one in.
	kind := OpPush
	if h.Type == wire.TypePullRequest {
		kind = OpPull
	}
	return e.placeholder(ci, c, h, kind, h.Type == wire.TypePushRequest, RefusalUnspecified)
}

// giveUpConn fails connection ci once the transport's work of this Poll
// is done (the transport's callbacks may not tear a connection down):
// the peer never acknowledged an abort notice it was sent RetryLimit+1
// times over a link that carries everything else.
func (e *Endpoint) giveUpConn(ci int32) {
	c := &e.conns[ci]
	if c.givingUp {
		return
	}
	c.givingUp = true
	e.giveUps = append(e.giveUps, ci) // at most one entry per connection: no growth
}

// giveUpPending fails the connections giveUpConn marked: their operations
// complete (StatusConnFailed unless decided already), the target ULP
// hears of the requests it held, and the transport connection is
// aborted; OnConnEvent hears ConnFailed with rt.ErrRetryExhausted.
func (e *Endpoint) giveUpPending() {
	for _, ci := range e.giveUps {
		c := &e.conns[ci]
		if !c.live || !c.givingUp {
			continue // ended meanwhile
		}
		e.cnt.own[cNoticeGiveUps]++
		rc := c.rc
		e.teardown(ci, rt.ErrRetryExhausted)
		rc.Abort() // the transport's own report finds nothing here
	}
	e.giveUps = e.giveUps[:0]
	e.unpublished = true // the counters changed
}

// noticeDeferred follows a NACK that is not a refusal (no room, not
// ready): if it names an abort notice of ours, the peer has it and defers
// it, so it is not ignoring it: the notice's budget starts again.
func (e *Endpoint) noticeDeferred(ev rt.Event) {
	_, c := e.connOf(ev.Conn)
	if c == nil {
		return
	}
	for i := c.head; i >= 0; i = e.xacts[i].next {
		x := &e.xacts[i]
		if x.notice == noticeOut && x.noticePSN == ev.PSN && x.noticeWin == ev.Window {
			x.noticeResends = 0
			return
		}
	}
}
